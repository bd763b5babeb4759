"""One runtime connection from connect to close: register, configure, sync, serve.

The session's progress follows the plugin lifecycle table the simulated runtime follows too
(bridge.contract.plugin_lifecycle). Configure may arrive before the RegisterPlugin response
(the runtime marks us registered before replying, docs/protocol.md#registration), so the
session counts as configured once both have happened.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from bridge.call_watch import CallWatch
from bridge.contract.plugin_lifecycle import Lifecycle, Phase, Step
from bridge.errors import BridgeError, ConfigError, ConnectionClosed, RpcError
from bridge.nri.cache import StateCache
from bridge.nri.event_call import RuntimeInfo
from bridge.nri.runtime_setup import DEFAULT_REGISTRATION_TIMEOUT_S
from bridge.nri.service import ServiceFactory, SessionHooks
from bridge.nri.update_routes import CRI_UPDATE_CALL, CriRoute, UpdateSettings, choose_route
from bridge.nri.updates import Deliver, UpdateOutcome, UpdateSender
from bridge.proto.nri import api_pb2 as api
from bridge.transport.trunk import Trunk
from bridge.wire import mux

log = logging.getLogger(__name__)

RUNTIME_SERVICE = "nri.pkg.api.v1alpha1.Runtime"
NRI_API_VERSION = "v0.12.2"  # the API revision schemas/nri/api.proto follows
# What the session calls on the runtime: NRI over the plugin connection, CRI for updates on
# runtimes where NRI UpdateContainers can deadlock (bridge.nri.update_routes).
RUNTIME_CALLS = ("RegisterPlugin", "UpdateContainers", CRI_UPDATE_CALL)
SYNC_WAIT_S = 300.0  # how long we wait for the runtime to synchronize us
# v0.6.x runtimes never split a large Synchronize; accept their oversized
# frames up to 16 MiB instead of dropping the sync (docs/protocol.md#hostile-input).
MAX_REQUEST_BYTES = 16 << 20

_NAME_RE = re.compile(r"^[A-Za-z0-9_.+-]+$")
_INDEX_RE = re.compile(r"^[0-9]{2}$")


@dataclass(frozen=True, slots=True)
class PluginIdentity:
    name: str
    index: str

    def __post_init__(self) -> None:
        if not _NAME_RE.match(self.name):
            raise ConfigError("plugin-name", f"{self.name!r} must match [A-Za-z0-9_.+-]+")
        if not _INDEX_RE.match(self.index):
            raise ConfigError("plugin-index", f"{self.index!r} must be two digits 00-99")


Opener = Callable[[Callable[[], Trunk]], Awaitable[Trunk]]


class PluginSession:
    def __init__(self, identity: PluginIdentity, connect: ServiceFactory, cache: StateCache,
                 updates: UpdateSettings | None = None,
                 calls: CallWatch | None = None) -> None:
        self.identity = identity
        self._cache = cache
        self._update_settings = updates or UpdateSettings()
        self._route: Deliver | None = None
        self.calls = calls if calls is not None else CallWatch()
        self.lifecycle = Lifecycle("session")
        self.trunk: Trunk | None = None
        self.sender: UpdateSender | None = None
        self._configured = asyncio.Event()
        self._synchronized = asyncio.Event()
        self.service = connect(SessionHooks(
            defer=self._defer, on_configured=lambda _: self._configured.set(),
            on_synchronized=self._synchronized.set))

    @property
    def runtime(self) -> RuntimeInfo | None:
        return self.service.runtime

    @property
    def state(self) -> Phase:
        return self.lifecycle.phase

    def _advance(self, step: Step) -> None:
        before = self.lifecycle.phase
        after = self.lifecycle.advance(step)
        log.debug("session %s -> %s (%s)", before.value, after.value, step.value)

    def _defer(self, updates: Sequence[api.ContainerUpdate]) -> None:
        if self.sender is not None:
            self.sender.defer(updates)

    async def run(self, opener: Opener) -> str:
        """Serve one connection until it closes; returns why it closed."""
        trunk = await opener(lambda: Trunk(
            server_conn=mux.PLUGIN_SERVICE_CONN, client_conn=mux.RUNTIME_SERVICE_CONN,
            services=self.service.table(), max_request_bytes=MAX_REQUEST_BYTES, name="nri",
        ))
        self.trunk = trunk
        self.sender = UpdateSender(self._deliver_updates)
        sender_task = asyncio.get_running_loop().create_task(self.sender.run(), name="updates")
        try:
            await self._handshake(trunk)
            self._advance(Step.SYNCHRONIZE)
            log.info("registered", extra={
                "plugin": f"{self.identity.index}-{self.identity.name}",
                "runtime": self.runtime.name if self.runtime else "",
                "runtime_version": self.runtime.version if self.runtime else ""})
            await trunk.wait_closed()
            return trunk.close_reason
        except (BridgeError, TimeoutError) as exc:
            reason = trunk.close_reason or str(exc) or type(exc).__name__
            log.warning("session ended (%s): %s", self.state.value, reason)
            return reason
        finally:
            if not self.lifecycle.closed:
                self._advance(Step.CLOSE)
            trunk.close()
            sender_task.cancel()
            self.service.shutdown()
            self.sender.abandon(ConnectionClosed("connection closed"))
            if isinstance(self._route, CriRoute):
                self._route.client.close()
            await asyncio.gather(sender_task, return_exceptions=True)
            await trunk.wait_closed()

    async def _handshake(self, trunk: Trunk) -> None:
        self._advance(Step.REGISTER_PLUGIN)
        request = api.RegisterPluginRequest(
            plugin_name=self.identity.name, plugin_idx=self.identity.index,
            NRI_version=NRI_API_VERSION,
        )
        closed: asyncio.Future[object] = asyncio.ensure_future(trunk.wait_closed())
        try:
            try:
                await self._call(trunk, "RegisterPlugin", request.SerializeToString(),
                                 timeout_s=DEFAULT_REGISTRATION_TIMEOUT_S,
                                 detail=f"{self.identity.index}-{self.identity.name}")
            except RpcError as exc:
                # The runtime does not close the socket after refusing us; we do.
                raise BridgeError(f"registration refused: {exc.message}") from None
            runtime_wait = (self.runtime.registration_timeout_s if self.runtime
                            else DEFAULT_REGISTRATION_TIMEOUT_S)
            await self._until(self._configured, closed, runtime_wait + 2.0, "Configure")
            self._advance(Step.CONFIGURE)
            await self._until(self._synchronized, closed, SYNC_WAIT_S, "Synchronize")
        finally:
            closed.cancel()

    async def _until(self, flag: asyncio.Event, closed: asyncio.Future[object], timeout_s: float,
                     what: str) -> None:
        waiter: asyncio.Future[object] = asyncio.ensure_future(flag.wait())
        try:
            done, _ = await asyncio.wait({waiter, closed}, timeout=timeout_s,
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        if not flag.is_set():
            if closed in done:
                raise ConnectionClosed(f"connection closed while waiting for {what}")
            raise TimeoutError(f"no {what} from the runtime within {timeout_s:.0f}s")

    async def _deliver_updates(self, updates: list[api.ContainerUpdate]) -> UpdateOutcome:
        """Deliver by the route chosen for this runtime (bridge.nri.update_routes)."""
        if self._route is None:
            if self.runtime is None:
                raise ConnectionClosed("not configured by the runtime yet")
            self._route = choose_route(self._update_settings, self.runtime,
                                       self._call_update_containers, self._cache.containers.get,
                                       self.calls)
        return await self._route(updates)

    async def _call_update_containers(
        self, request: api.UpdateContainersRequest, timeout_s: float,
    ) -> api.UpdateContainersResponse:
        if self.trunk is None:
            raise ConnectionClosed("not connected")
        payload = await self._call(self.trunk, "UpdateContainers", request.SerializeToString(),
                                   timeout_s=timeout_s, send_timeout=False,
                                   detail=f"{len(request.update)} containers")
        response = api.UpdateContainersResponse()
        response.ParseFromString(payload)
        return response

    async def _call(self, trunk: Trunk, method: str, payload: bytes, *, timeout_s: float,
                    detail: str, send_timeout: bool = True) -> bytes:
        """Every call of ours to the runtime: watched, so one that hangs is seen."""
        with self.calls.track(method, detail):
            return await trunk.client.call(RUNTIME_SERVICE, method, payload,
                                           timeout_s=timeout_s, send_timeout=send_timeout)

    @property
    def in_flight(self) -> int:
        """Requests from the runtime being served right now."""
        return self.trunk.server.in_flight if self.trunk is not None else 0

    async def drain(self, grace_s: float) -> None:
        """Let in-flight event handlers answer (bounded), then close the connection."""
        trunk = self.trunk
        if trunk is None:
            return
        try:
            async with asyncio.timeout(grace_s):
                await trunk.server.idle()
        except TimeoutError:
            log.warning("closing with %d events still in flight", trunk.server.in_flight)
        trunk.close("shutting down")
