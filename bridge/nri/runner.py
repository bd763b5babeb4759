"""Keeps the plugin connected: sessions in a loop with exponential backoff.

An external plugin reconnects after the runtime restarts or the socket goes
away, then re-registers and re-synchronizes (which re-delivers every pod and
container created while we were away, so policies see them again). Between
attempts it watches the socket path: a new socket there ends the wait at once
(transport/socket_watch.py), so a restarted runtime gets us back within a
fraction of a second instead of after the backoff. A plugin launched by the
runtime (NRI_PLUGIN_SOCKET) cannot reconnect, because its fd is gone: it stops.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass

from bridge.call_watch import CallWatch
from bridge.contract.plugin_lifecycle import Phase
from bridge.errors import BridgeError
from bridge.nri.cache import StateCache
from bridge.nri.service import ServiceFactory
from bridge.nri.session import RUNTIME_CALLS, Opener, PluginIdentity, PluginSession
from bridge.nri.update_routes import UpdateSettings
from bridge.nri.updates import UpdateOutcome
from bridge.proto.nri import api_pb2 as api
from bridge.transport import connect
from bridge.transport.socket_watch import SocketId, socket_identity, wait_for_new_socket

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 6.0


@dataclass(frozen=True, slots=True)
class Backoff:
    initial_s: float = 0.25
    factor: float = 2.0
    max_s: float = 30.0

    def delay(self, attempt: int) -> float:
        base = min(self.max_s, self.initial_s * self.factor ** max(0, attempt))
        return base * random.uniform(0.8, 1.0)  # jitter so a fleet does not stampede


class PluginRunner:
    """Built by bridge.nri.stub.new_plugin: `services` makes each connection's Plugin service."""

    def __init__(self, identity: PluginIdentity, services: ServiceFactory, *,
                 socket_path: str = connect.DEFAULT_SOCKET_PATH, fd: int | None = None,
                 backoff: Backoff | None = None,
                 cache: StateCache | None = None, updates: UpdateSettings | None = None,
                 calls: CallWatch | None = None) -> None:
        self.identity = identity
        self.services = services
        self.socket_path = socket_path
        self.fd = fd
        self.backoff = backoff or Backoff()
        self.cache = cache if cache is not None else StateCache()
        self.update_settings = updates or UpdateSettings()
        # Every call of ours to the runtime, across sessions (the metrics and /readyz read it).
        self.calls = calls if calls is not None else CallWatch()
        self.calls.declare(*RUNTIME_CALLS)
        self.session: PluginSession | None = None
        self.reconnects = 0
        self._stopping = False

    @property
    def ready(self) -> bool:
        """Registered, configured, synchronized and serving."""
        session = self.session
        return (session is not None and session.state is Phase.SYNCHRONIZED
                and session.trunk is not None and session.trunk.is_open)

    @property
    def deadline_misses(self) -> int:
        """Handlers of the current connection that missed their deadline."""
        return self.session.service.stats.deadline_misses if self.session is not None else 0

    @property
    def in_flight(self) -> int:
        return self.session.in_flight if self.session is not None else 0

    async def update_containers(self, updates: list[api.ContainerUpdate]) -> UpdateOutcome:
        """Send unsolicited updates now (not from event handlers): what the runtime did."""
        session = self.session
        if session is None or session.sender is None or not self.ready:
            raise BridgeError("not connected to the runtime")
        outcome = await session.sender.send(updates)
        self.cache.apply_updates(outcome.applied)
        return outcome

    def _opener(self) -> Opener:
        if self.fd is not None:
            fd = self.fd
            return lambda factory: connect.open_fd(fd, factory)
        path = self.socket_path
        return lambda factory: connect.open_path(path, factory, CONNECT_TIMEOUT_S)

    async def run(self) -> None:
        """Run sessions until stopped (or, when launched by the runtime, until the first ends)."""
        attempt = 0
        while not self._stopping:
            self.cache.clear()
            session = PluginSession(self.identity, self.services, self.cache,
                                    updates=self.update_settings, calls=self.calls)
            self.session = session
            tried: SocketId | None = (socket_identity(self.socket_path) if self.fd is None
                                      else None)
            try:
                reason = await session.run(self._opener())
            except (OSError, TimeoutError, BridgeError) as exc:
                reason = f"cannot connect to {self.socket_path}: {exc}"
            served = session.trunk is not None and session.service.runtime is not None
            if self._stopping:
                break
            if self.fd is not None:
                log.warning("connection lost", extra={
                "reason": reason, "action": "exit (launched plugins cannot reconnect)"})
                return
            attempt = 0 if served else attempt + 1
            delay = self.backoff.delay(attempt)
            log.warning("connection lost", extra={
                "reason": reason,
                "action": f"reconnect when the socket is back, at the latest in {delay:.2f}s"})
            self.reconnects += 1
            if await wait_for_new_socket(self.socket_path, tried, delay):
                log.info("runtime socket is back; reconnecting now",
                         extra={"socket": self.socket_path})

    async def stop(self, grace_s: float = 1.0) -> None:
        self._stopping = True
        if self.session is not None:
            await self.session.drain(grace_s)
