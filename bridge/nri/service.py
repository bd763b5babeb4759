"""The Plugin service (conn 1): Configure, Synchronize, every event RPC, StateChange.

Rules this module enforces (protocol §4, §8, §9):
- every one of the 18 Plugin methods answers; events the handler does not want
  get an empty success, never Unimplemented (a v0.12 runtime would switch us
  to StateChange permanently);
- StateChange is dispatched on its `event`; unknown values get an empty success;
- the event mask is computed from the handler's wishes, the cache's needs and
  what the runtime's NRI version knows: never 0, never an unknown bit;
- Synchronize chunks with `more=true` are buffered and answered `more=true`
  with no updates; the final chunk gets all updates. One budget covers all
  chunks; if the handler needs longer, the runtime is answered in time and the
  late updates go out through UpdateContainers afterwards;
- every handler runs under the request deadline minus a safety margin; a
  missed deadline answers "no change" instead of getting the plugin dropped.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from google.protobuf.message import DecodeError, Message

from bridge.contract.catalogue import (
    EVENTS_BY_RPC,
    POD_EVENTS,
    REQUEST_TYPES,
    Event,
    events_of,
    mask_of,
)
from bridge.contract.nri_version import format_version, nri_version_of, supported_mask
from bridge.errors import ConfigError, RpcError
from bridge.nri.cache import MAX_OBJECTS, StateCache
from bridge.nri.handler_api import (
    HANDLER_METHODS,
    EventContext,
    EventRejected,
    Handler,
    RuntimeInfo,
)
from bridge.proto.nri import api_pb2 as api
from bridge.transport.ttrpc_server import MethodHandler
from bridge.wire.envelope import Request
from bridge.wire.status import Code

log = logging.getLogger(__name__)

PLUGIN_SERVICE = "nri.pkg.api.v1alpha1.Plugin"
DEFAULT_REGISTRATION_TIMEOUT_S = 5.0
DEFAULT_REQUEST_TIMEOUT_S = 2.0
LATE_SYNC_LIMIT_S = 60.0
# Synchronize chunks are buffered until `more=false`; a runtime that never sends
# it must not grow the buffer without bound (the cache keeps no more anyway).
MAX_SYNC_OBJECTS = MAX_OBJECTS

# Events the state cache needs to stay current (GET /v1/state, id checks).
CACHE_EVENTS = frozenset({
    Event.RUN_POD_SANDBOX, Event.REMOVE_POD_SANDBOX, Event.CREATE_CONTAINER,
    Event.UPDATE_CONTAINER, Event.STOP_CONTAINER, Event.REMOVE_CONTAINER,
})



@dataclass(frozen=True, slots=True)
class ServiceOptions:
    track_state: bool = True
    margin_s: float = 0.15  # answer at least this long before the runtime's deadline
    margin_fraction: float = 0.10  # ... or this fraction of the budget, if larger


@dataclass(slots=True)
class ServiceStats:
    events: dict[str, int] = field(default_factory=dict)
    deadline_misses: int = 0
    handler_errors: int = 0
    rejections: int = 0
    late_sync_updates: int = 0


class PluginService:
    def __init__(
        self,
        handler: Handler,
        cache: StateCache,
        defer_updates: Callable[[Sequence[api.ContainerUpdate]], None],
        options: ServiceOptions,
        on_configured: Callable[[RuntimeInfo], None],
        on_synchronized: Callable[[], None],
    ) -> None:
        self._handler = handler
        self._cache = cache
        self._defer = defer_updates
        self._options = options
        self._on_configured = on_configured
        self._on_synchronized = on_synchronized
        self.runtime: RuntimeInfo | None = None
        self.subscribed: frozenset[Event] = frozenset()
        self._wanted: frozenset[Event] = frozenset()
        self._sync_pods: list[api.PodSandbox] = []
        self._sync_containers: list[api.Container] = []
        self._sync_deadline: float | None = None
        self._late: set[asyncio.Task[None]] = set()
        self.stats = ServiceStats()

    def table(self) -> dict[str, dict[str, MethodHandler]]:
        methods: dict[str, MethodHandler] = {
            "Configure": self._configure,
            "Synchronize": self._synchronize,
            "Shutdown": self._shutdown,
            "StateChange": self._state_change,
        }
        for rpc, event in EVENTS_BY_RPC.items():
            methods[rpc] = partial(self._dedicated, event)
        return {PLUGIN_SERVICE: methods}

    def shutdown(self) -> None:
        for task in list(self._late):
            task.cancel()

    # -- Configure ---------------------------------------------------------------

    async def _configure(self, request: Request) -> bytes:
        req = _decode(api.ConfigureRequest, request.payload)
        nri = nri_version_of(req.runtime_name, req.runtime_version, req.NRI_version)
        runtime = RuntimeInfo(
            name=req.runtime_name,
            version=req.runtime_version,
            nri_version=nri,
            config=req.config,
            registration_timeout_s=(req.registration_timeout / 1000.0
                                    if req.registration_timeout > 0
                                    else DEFAULT_REGISTRATION_TIMEOUT_S),
            request_timeout_s=(req.request_timeout / 1000.0 if req.request_timeout > 0
                               else DEFAULT_REQUEST_TIMEOUT_S),
        )
        try:
            await self._handler.configure(runtime)
        except ConfigError as exc:
            # A launched plugin's conf.d file that does not parse: refuse Configure, so
            # the runtime logs why and drops us, rather than run half-configured.
            raise RpcError(Code.INVALID_ARGUMENT, f"invalid plugin configuration: {exc}",
                           ) from None
        self._wanted = self._handler.wanted_events()
        wanted = self._wanted | (CACHE_EVENTS if self._options.track_state else frozenset())
        allowed = supported_mask(nri)
        mask = mask_of(set(wanted)) & allowed
        dropped = wanted - events_of(mask)
        if dropped:
            log.warning("runtime %s %s (NRI %s) does not support %s; not subscribing to them",
                        runtime.name, runtime.version, format_version(nri),
                        ", ".join(sorted(e.rpc_name for e in dropped)))
        if mask == 0:
            # 0 would subscribe us to everything, validation included; fall back
            # to a harmless post-event so the runtime keeps us (protocol §4.3).
            mask = Event.REMOVE_CONTAINER.bit
        self.subscribed = events_of(mask)
        self.runtime = runtime
        log.info("configured by %s %s (NRI %s): events 0x%04x, request timeout %.0f ms",
                 runtime.name, runtime.version, format_version(nri), mask,
                 runtime.request_timeout_s * 1000,
                 extra={"runtime": runtime.name,
                        "events": sorted(e.rpc_name for e in self.subscribed)})
        self._on_configured(runtime)
        return _wire(api.ConfigureResponse(events=mask))

    # -- Synchronize -------------------------------------------------------------

    async def _synchronize(self, request: Request) -> bytes:
        req = _decode(api.SynchronizeRequest, request.payload)
        if self._sync_deadline is None:
            self._sync_deadline = self._deadline(request)
        dropped = (_extend_bounded(self._sync_pods, req.pods)
                   + _extend_bounded(self._sync_containers, req.containers))
        if dropped:
            log.warning("Synchronize: more than %d pods or containers; dropping %d objects",
                        MAX_SYNC_OBJECTS, dropped)
        self._count("Synchronize")
        if req.more:
            return _wire(api.SynchronizeResponse(more=True))
        pods, containers = self._sync_pods, self._sync_containers
        deadline = self._sync_deadline
        self._sync_pods, self._sync_containers, self._sync_deadline = [], [], None
        self._cache.reset(pods, containers)
        ctx = self._context(None, "Synchronize", deadline, False)
        task = asyncio.get_running_loop().create_task(
            self._late_bounded(self._handler.synchronize(ctx, pods, containers)))
        updates: Sequence[api.ContainerUpdate] = ()
        try:
            async with asyncio.timeout_at(deadline):
                updates = await asyncio.shield(task)
        except TimeoutError:
            self.stats.deadline_misses += 1
            log.warning("Synchronize handler missed the deadline; answering now, "
                        "its updates will follow through UpdateContainers")
            self._deliver_late(task)
        except EventRejected as exc:
            self.stats.rejections += 1
            log.warning("Synchronize rejected by handler: %s", exc.reason)
        except Exception:
            self.stats.handler_errors += 1
            log.exception("Synchronize handler failed; answering without updates")
        self._cache.apply_updates(updates)
        self._on_synchronized()
        log.info("synchronized %d pods, %d containers; %d updates",
                 len(pods), len(containers), len(updates))
        return _wire(api.SynchronizeResponse(update=list(updates), more=False))

    async def _late_bounded(
        self, work: Awaitable[Sequence[api.ContainerUpdate]],
    ) -> Sequence[api.ContainerUpdate]:
        async with asyncio.timeout(LATE_SYNC_LIMIT_S):
            return await work

    def _deliver_late(self, task: asyncio.Task[Sequence[api.ContainerUpdate]]) -> None:
        async def wait_and_send() -> None:
            try:
                updates = await task
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("late Synchronize handler failed; no updates delivered")
                return
            self.stats.late_sync_updates += len(updates)
            self._defer(updates)
        follower = asyncio.get_running_loop().create_task(wait_and_send())
        self._late.add(follower)
        follower.add_done_callback(self._late.discard)

    # -- events --------------------------------------------------------------------

    async def _dedicated(self, event: Event, request: Request) -> bytes:
        req = _decode(REQUEST_TYPES[event], request.payload)
        response = await self._dispatch(event, req, self._deadline(request), via_state_change=False)
        return _wire(response) if response is not None else b""

    async def _state_change(self, request: Request) -> bytes:
        change = _decode(api.StateChangeEvent, request.payload)
        try:
            event = Event(change.event)
        except ValueError:
            log.debug("StateChange with unknown event %d; answering empty", change.event)
            return b""
        req = REQUEST_TYPES[event]()
        if change.HasField("pod") and "pod" in req.DESCRIPTOR.fields_by_name:
            req.pod.CopyFrom(change.pod)  # type: ignore[attr-defined]
        if (event not in POD_EVENTS and change.HasField("container")
                and "container" in req.DESCRIPTOR.fields_by_name):
            req.container.CopyFrom(change.container)  # type: ignore[attr-defined]
        await self._dispatch(event, req, self._deadline(request), via_state_change=True)
        return b""  # Empty: whatever the handler returned has no channel here

    async def _shutdown(self, request: Request) -> bytes:
        _decode(api.Empty, request.payload)  # Go ttrpc decodes every input: garbage -> Internal
        log.info("runtime sent Shutdown")
        return b""

    async def _dispatch(self, event: Event, req: Any, deadline: float,
                        via_state_change: bool) -> Message | None:
        self._count(event.rpc_name)
        if self._options.track_state:
            pod = req.pod if req.HasField("pod") else None
            container = (req.container if "container" in req.DESCRIPTOR.fields_by_name
                         and req.HasField("container") else None)
            self._cache.observe(event, pod, container)
        response = await self._call_handler(event, req, deadline, via_state_change)
        if self._options.track_state:
            self._cache.apply_answer(event, req, response)
        return response

    async def _call_handler(self, event: Event, req: Any, deadline: float,
                            via_state_change: bool) -> Message | None:
        if event not in self._wanted or self.runtime is None:
            return None
        ctx = self._context(event, event.rpc_name, deadline, via_state_change)
        method = getattr(self._handler, HANDLER_METHODS[event])
        try:
            async with asyncio.timeout_at(deadline):
                response: Message | None = await method(ctx, req)
        except TimeoutError:
            self.stats.deadline_misses += 1
            log.warning("%s handler missed the deadline; answering with no change", event.rpc_name,
                        extra={"event": event.rpc_name, "uid": ctx.uid})
            return None
        except EventRejected as exc:
            self.stats.rejections += 1
            if event is Event.VALIDATE_CONTAINER_ADJUSTMENT:
                rejected: Message = api.ValidateContainerAdjustmentResponse(reject=True,
                                                                            reason=exc.reason)
                return rejected
            raise RpcError(Code.UNKNOWN, exc.reason) from None
        except Exception:
            self.stats.handler_errors += 1
            log.exception("%s handler failed; answering with no change", event.rpc_name,
                          extra={"event": event.rpc_name, "uid": ctx.uid})
            return None
        return response

    # -- helpers -------------------------------------------------------------------

    def _deadline(self, request: Request) -> float:
        """When our answer must be written: the tighter of the request's own
        deadline and the configured request timeout, minus a safety margin."""
        budget = self.runtime.request_timeout_s if self.runtime else DEFAULT_REQUEST_TIMEOUT_S
        if request.timeout_nano > 0:
            budget = min(budget, request.timeout_nano / 1e9)
        margin = max(self._options.margin_s, budget * self._options.margin_fraction)
        return asyncio.get_running_loop().time() + max(budget - margin, budget / 2)

    def _context(self, event: Event | None, name: str, deadline: float,
                 via_state_change: bool) -> EventContext:
        assert self.runtime is not None or event is None
        runtime = self.runtime or RuntimeInfo("", "", None, "", DEFAULT_REGISTRATION_TIMEOUT_S,
                                              DEFAULT_REQUEST_TIMEOUT_S)
        return EventContext(event=event, name=name, uid=uuid.uuid4().hex, deadline=deadline,
                            runtime=runtime, via_state_change=via_state_change,
                            defer_updates=self._defer)

    def _count(self, name: str) -> None:
        self.stats.events[name] = self.stats.events.get(name, 0) + 1


def _decode(cls: type[Any], payload: bytes) -> Any:
    msg = cls()
    try:
        msg.ParseFromString(payload)
    except (DecodeError, ValueError) as exc:
        raise RpcError(Code.INTERNAL, f"cannot decode {cls.__name__}: {exc}") from None
    return msg


def _extend_bounded(buffer: list[Any], items: Sequence[Any]) -> int:
    """Append what fits under MAX_SYNC_OBJECTS; returns how many did not."""
    room = max(0, MAX_SYNC_OBJECTS - len(buffer))
    buffer.extend(items[:room])
    return max(0, len(items) - room)


def _wire(msg: Message) -> bytes:
    data: bytes = msg.SerializeToString()
    return data
