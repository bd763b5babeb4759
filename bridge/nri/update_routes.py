"""How unsolicited updates reach the runtime: NRI UpdateContainers, or CRI where that deadlocks.

A plugin-initiated UpdateContainers takes a runtime's two NRI locks in the inverse order of its
lifecycle events on every NRI before v0.12.1: a container exit while it runs wedges the runtime
(containerd/containerd#13733; docs/protocol.md#unsolicited-updates-and-the-runtimes-locks). On
those runtimes (and on any runtime not known to be fixed) the bridge changes running containers
as kubelet does, with CRI UpdateContainerResources: the runtime runs its own UpdateContainer
event, in its own lock order, through every plugin, records the resources as the container's
and applies them.

Owns: the `updates` settings, the choice of route for a runtime (`choose_route`), and the two
routes. Must not: queue or schedule deliveries (bridge.nri.updates) or speak the wire itself.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from bridge.call_watch import CallWatch
from bridge.contract.applied_view import as_applied, short
from bridge.contract.cri_service import CriConversionError, to_cri
from bridge.contract.nri_version import (
    format_version,
    parse_version,
    plugin_updates_can_deadlock,
)
from bridge.contract.runtime_effects import Effect, Route, Runtime
from bridge.cri.runtime_service import CriClient, CriError, default_socket
from bridge.errors import BridgeError, ConfigError
from bridge.nri.event_call import RuntimeInfo
from bridge.nri.updates import UPDATE_TIMEOUT_S, Deliver, UpdateOutcome
from bridge.proto.nri import api_pb2 as api

log = logging.getLogger(__name__)

ROUTES = ("auto", "cri", "nri")
NRI_ROUTE = "UpdateContainers"
CRI_ROUTE = "CRI UpdateContainerResources"
CRI_CONCURRENCY = 4  # containers updated at once through CRI (each one a runc update)
UPSTREAM_ISSUE = "containerd/containerd#13733"
# The names our CRI calls have in the call watch (stuck-call metrics, /readyz, log lines).
CRI_UPDATE_CALL = "UpdateContainerResources"
CRI_VERSION_CALL = "CRI Version"

CallNri = Callable[[api.UpdateContainersRequest, float], Awaitable[api.UpdateContainersResponse]]
Current = Callable[[str], "api.Container | None"]


@dataclass(frozen=True, slots=True)
class UpdateSettings:
    """The `updates:` section: which route, and where the runtime's CRI socket is."""

    route: str = "auto"  # auto: CRI where UpdateContainers can deadlock, else NRI
    cri_socket: str | None = None  # None: the runtime's default (bridge.cri.runtime_service)
    # What POST /v1/updates may change, as listed (None: the default); its entries are
    # checked by the config file's loader (bridge.config_file, with bridge.webhooks.kinds).
    allow: tuple[str, ...] | None = None

    @classmethod
    def parse(cls, section: Any, key: str = "updates") -> UpdateSettings:
        if section is None:
            return cls()
        if not isinstance(section, dict):
            raise ConfigError(key, "must be a mapping")
        unknown = sorted(set(section) - {"route", "cri_socket", "allow"})
        if unknown:
            raise ConfigError(f"{key}.{unknown[0]}",
                              "unknown key (known: allow, cri_socket, route)")
        route = section.get("route", "auto")
        if route not in ROUTES:
            raise ConfigError(f"{key}.route", f"{route!r}: must be one of {', '.join(ROUTES)}")
        socket = section.get("cri_socket")
        if socket is not None and (not isinstance(socket, str) or not socket.startswith("/")):
            raise ConfigError(f"{key}.cri_socket", f"{socket!r}: must be an absolute path")
        allow = section.get("allow")
        if allow is not None and (not isinstance(allow, list)
                                  or not all(isinstance(a, str) for a in allow)):
            raise ConfigError(f"{key}.allow", "must be a list of strings")
        return cls(route=route, cri_socket=socket,
                   allow=tuple(allow) if allow is not None else None)


class NriRoute:
    """Runtime.UpdateContainers over the NRI connection (runtimes with NRI >= v0.12.1)."""

    name = NRI_ROUTE

    def __init__(self, call: CallNri) -> None:
        self._call = call

    async def __call__(self, updates: list[api.ContainerUpdate]) -> UpdateOutcome:
        response = await self._call(api.UpdateContainersRequest(update=updates),
                                    UPDATE_TIMEOUT_S)
        refused = {u.container_id for u in response.failed}
        return UpdateOutcome(self.name, failed=list(response.failed),
                             applied=[u for u in updates if u.container_id not in refused])


class CriRoute:
    """CRI UpdateContainerResources, one call per container (in order per container)."""

    name = CRI_ROUTE

    def __init__(self, client: CriClient, current: Current, runtime: RuntimeInfo,
                 timeout_s: float = UPDATE_TIMEOUT_S, calls: CallWatch | None = None) -> None:
        self.client = client
        self._calls = calls if calls is not None else CallWatch()
        self._current = current
        self._runtime = runtime
        # What this runtime does with each leaf of an update that comes by CRI (the field
        # table's cri_update route): CRI cannot carry some, and a limit without a swap sets
        # swap to the limit.
        self._effects = Runtime(runtime.name, runtime.version, runtime.nri_version)
        self._timeout_s = timeout_s
        self._checked = False

    async def __call__(self, updates: list[api.ContainerUpdate]) -> UpdateOutcome:
        if not self._checked:
            await self._check_socket()
        by_container: dict[str, list[api.ContainerUpdate]] = {}
        for update in updates:
            by_container.setdefault(update.container_id, []).append(update)
        slots = asyncio.Semaphore(CRI_CONCURRENCY)
        outcome = UpdateOutcome(self.name)

        async def one_container(batch: list[api.ContainerUpdate]) -> None:
            async with slots:
                for update in batch:
                    await self._one(update, outcome)

        await asyncio.gather(*(one_container(b) for b in by_container.values()))
        return outcome

    async def _one(self, update: api.ContainerUpdate, outcome: UpdateOutcome) -> None:
        container = self._current(update.container_id)
        try:
            converted = to_cri(update, container.linux.resources if container else None)
        except CriConversionError as exc:
            log.warning("update not sent", extra={"container": update.container_id,
                                                  "reason": str(exc)})
            outcome.failed.append(update)
            return
        view = as_applied(update, Route.CRI_UPDATE, self._effects)
        dropped = tuple(sorted(short(n.path) for n in view.notices
                               if n.effect is Effect.IGNORED))
        if dropped:
            outcome.dropped[update.container_id] = (
                outcome.dropped.get(update.container_id, ()) + dropped)
        if not converted.carried.linux.resources.ListFields():
            return  # nothing CRI can carry: the drop is the whole answer
        try:
            with self._calls.track(CRI_UPDATE_CALL, update.container_id):
                await self.client.update_container_resources(converted.request, self._timeout_s)
        except CriError as exc:
            log.warning("runtime refused a container update", extra={
                "container": update.container_id, "route": self.name, "reason": str(exc),
                "ignored": update.ignore_failure})
            if not update.ignore_failure:
                outcome.failed.append(update)
            return
        outcome.applied.append(view.message)  # what the runtime keeps (swap = limit included)

    async def _check_socket(self) -> None:
        """Refuse a CRI socket that serves another runtime than the NRI socket (once)."""
        with self._calls.track(CRI_VERSION_CALL, self.client.socket_path):
            served = await self.client.version()
        ours, theirs = parse_version(self._runtime.version), parse_version(served.runtime_version)
        if ours is not None and theirs is not None and ours != theirs:
            raise BridgeError(
                f"the CRI socket {self.client.socket_path} serves {served.runtime_name} "
                f"{served.runtime_version}, but the NRI socket {self._runtime.name} "
                f"{self._runtime.version}: set updates.cri_socket (--cri-socket) to the "
                "runtime the bridge is registered with")
        self._checked = True


class Unroutable:
    """No safe route: every delivery fails, saying why (no CRI socket for this runtime)."""

    name = "none"

    def __init__(self, reason: str) -> None:
        self.reason = reason

    async def __call__(self, updates: list[api.ContainerUpdate]) -> UpdateOutcome:
        raise BridgeError(self.reason)


def choose_route(settings: UpdateSettings, runtime: RuntimeInfo, call_nri: CallNri,
                 current: Current, calls: CallWatch | None = None) -> Deliver:
    """The route for this runtime, logged once with the reason."""
    deadlocks = plugin_updates_can_deadlock(runtime.name, runtime.nri_version)
    who = f"{runtime.name} {runtime.version} (NRI {format_version(runtime.nri_version)})"
    if settings.route == "nri" or (settings.route == "auto" and not deadlocks):
        if deadlocks:
            log.warning("updates go through NRI UpdateContainers as configured, though this "
                        "runtime can deadlock on them", extra={
                            "runtime": who, "upstream": UPSTREAM_ISSUE})
        else:
            log.info("updates go through NRI UpdateContainers", extra={"runtime": who})
        return NriRoute(call_nri)
    socket = settings.cri_socket or default_socket(runtime.name)
    if socket is None:
        reason = (f"{who} may deadlock on NRI UpdateContainers ({UPSTREAM_ISSUE}) and has no "
                  "known CRI socket: set updates.cri_socket (--cri-socket)")
        log.error("container updates cannot be delivered", extra={"reason": reason})
        return Unroutable(reason)
    why = ("configured" if settings.route == "cri"
           else f"NRI UpdateContainers can deadlock this runtime ({UPSTREAM_ISSUE})")
    log.info("updates go through CRI UpdateContainerResources", extra={
        "runtime": who, "cri_socket": socket, "why": why})
    return CriRoute(CriClient(socket), current, runtime, calls=calls)
