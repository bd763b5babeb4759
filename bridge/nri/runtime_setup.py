"""The runtime's setup calls on conn 1: Configure, Synchronize, Shutdown
(docs/protocol.md#registration), and the EventCalls made under what Configure said.

Rules this module enforces:
- the event mask is computed from what the handler chain wants and what the runtime's NRI
  version knows: never 0, never an unknown bit (docs/protocol.md#configure-and-the-event-mask);
- Synchronize chunks with `more=true` are buffered (bounded) and answered `more=true` with no
  updates; the final chunk gets all updates. One budget covers all chunks; if the handler needs
  longer, the runtime is answered in time and the late updates go out through
  UpdateContainers afterwards (docs/protocol.md#synchronize);
- every deadline is the request's own or Configure's request timeout, minus a safety margin;
- a configuration the handler chain refuses at Configure (ConfigError: a launched plugin's
  Configure.config that does not parse) fails Configure with InvalidArgument, so the runtime
  logs why and drops the plugin instead of running it half-configured.

Owns the connection's RuntimeInfo and how an EventCall is made; event RPCs are dispatched by
bridge.nri.dispatch. Must not know what handlers do.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from google.protobuf.message import Message

from bridge.contract.catalogue import NriEvent, events_of, mask_of, supported_mask
from bridge.contract.nri_version import format_version, nri_version_of
from bridge.errors import ConfigError, RpcError
from bridge.node_tables.fold import MAX_OBJECTS
from bridge.nri.event_call import Answer, EventCall, EventHandler, RuntimeInfo
from bridge.nri.layers import GuardStats
from bridge.proto.nri import api_pb2 as api
from bridge.wire.envelope import Request
from bridge.wire.status import Code

log = logging.getLogger(__name__)


def _uid_source() -> Iterator[str]:
    """Request uids: 32 hex digits like a UUID's, a random half per process and a counter.

    Unique per process without a getrandom() syscall and a UUID object per event."""
    prefix = os.urandom(8).hex()
    return (f"{prefix}{n:016x}" for n in itertools.count())


_UIDS = _uid_source()

T = TypeVar("T", api.PodSandbox, api.Container)

DEFAULT_REGISTRATION_TIMEOUT_S = 5.0
DEFAULT_REQUEST_TIMEOUT_S = 2.0
LATE_SYNC_LIMIT_S = 60.0
# Synchronize chunks are buffered until `more=false`; a runtime that never sends
# it must not grow the buffer without bound (the cache keeps no more anyway).
MAX_SYNC_OBJECTS = MAX_OBJECTS
# What a Synchronize that arrives before Configure (a broken runtime) is served with.
UNCONFIGURED = RuntimeInfo("", "", None, "", DEFAULT_REGISTRATION_TIMEOUT_S,
                           DEFAULT_REQUEST_TIMEOUT_S)


@dataclass(frozen=True, slots=True)
class ServiceOptions:
    track_state: bool = True
    margin_s: float = 0.15  # answer at least this long before the runtime's deadline
    margin_fraction: float = 0.10  # ... or this fraction of the budget, if larger


@dataclass(slots=True)
class _SyncBuffer:
    pods: list[api.PodSandbox] = field(default_factory=list)
    containers: list[api.Container] = field(default_factory=list)
    deadline: float | None = None


@dataclass(frozen=True, slots=True)
class CallFactory:
    """How EventCalls are made under what Configure said (`runtime`; UNCONFIGURED before it):
    their uid, runtime, deadline and where late updates go. Made once per Configure and handed
    to the event dispatch then, so no event asks the setup again."""

    runtime: RuntimeInfo
    defer: Callable[[Sequence[api.ContainerUpdate]], None]
    options: ServiceOptions

    def deadline(self, request: Request) -> float:
        """When our answer must be written: the tighter of the request's own
        deadline and the configured request timeout, minus a safety margin."""
        budget = self.runtime.request_timeout_s
        if request.timeout_nano > 0:
            budget = min(budget, request.timeout_nano / 1e9)
        margin = max(self.options.margin_s, budget * self.options.margin_fraction)
        return asyncio.get_running_loop().time() + max(budget - margin, budget / 2)

    def __call__(self, event: NriEvent | None, name: str, deadline: float, *,
                 request: Message | None = None, via_state_change: bool = False,
                 pods: Sequence[api.PodSandbox] = (),
                 containers: Sequence[api.Container] = ()) -> EventCall:
        return EventCall(event=event, name=name, uid=next(_UIDS), deadline=deadline,
                         runtime=self.runtime, via_state_change=via_state_change,
                         defer_updates=self.defer, request=request, pods=pods,
                         containers=containers)


class RuntimeSetup:
    """What the runtime told the plugin (RuntimeInfo, the subscribed events) and the
    methods that learn it; see the module docstring. `on_calls` gets the CallFactory each
    Configure makes."""

    def __init__(self, chain: EventHandler,
                 defer_updates: Callable[[Sequence[api.ContainerUpdate]], None],
                 options: ServiceOptions, stats: GuardStats,
                 on_configured: Callable[[RuntimeInfo], None],
                 on_synchronized: Callable[[], None],
                 on_calls: Callable[[CallFactory], None] = lambda _: None) -> None:
        self._chain = chain
        self._defer = defer_updates
        self._options = options
        self._stats = stats
        self._on_configured = on_configured
        self._on_synchronized = on_synchronized
        self._on_calls = on_calls
        self.calls = CallFactory(UNCONFIGURED, defer_updates, options)
        self.runtime: RuntimeInfo | None = None
        self.subscribed: frozenset[NriEvent] = frozenset()
        self._sync = _SyncBuffer()
        self._late: set[asyncio.Task[None]] = set()

    def shutdown(self) -> None:
        for task in list(self._late):
            task.cancel()

    # -- Configure -------------------------------------------------------------------

    async def configure(self, req: api.ConfigureRequest, _: Request) -> api.ConfigureResponse:
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
            await self._chain.configure(runtime)
        except ConfigError as exc:
            # A launched plugin's conf.d file that does not parse: refuse Configure, so
            # the runtime logs why and drops us, rather than run half-configured.
            raise RpcError(Code.INVALID_ARGUMENT,
                           f"invalid plugin configuration: {exc}") from None
        wanted = self._chain.wanted_events()
        mask = mask_of(set(wanted)) & supported_mask(nri)
        dropped = wanted - events_of(mask)
        if dropped:
            log.warning("runtime %s %s (NRI %s) does not support %s; not subscribing to them",
                        runtime.name, runtime.version, format_version(nri),
                        ", ".join(sorted(e.rpc_name for e in dropped)))
        if mask == 0:
            # 0 would subscribe us to everything, validation included; fall back
            # to a harmless post-event so the runtime keeps us
            # (docs/protocol.md#configure-and-the-event-mask).
            mask = NriEvent.REMOVE_CONTAINER.bit
        self.subscribed = events_of(mask)
        self.runtime = runtime
        self.calls = CallFactory(runtime, self._defer, self._options)
        self._on_calls(self.calls)
        log.info("configured by %s %s (NRI %s): events 0x%04x, request timeout %.0f ms",
                 runtime.name, runtime.version, format_version(nri), mask,
                 runtime.request_timeout_s * 1000,
                 extra={"runtime": runtime.name,
                        "events": sorted(e.rpc_name for e in self.subscribed)})
        self._on_configured(runtime)
        return api.ConfigureResponse(events=mask)

    # -- Synchronize -----------------------------------------------------------------

    async def synchronize(self, req: api.SynchronizeRequest,
                          request: Request) -> api.SynchronizeResponse:
        buffer = self._sync
        if buffer.deadline is None:
            buffer.deadline = self.calls.deadline(request)
        dropped = (_extend_bounded(buffer.pods, req.pods)
                   + _extend_bounded(buffer.containers, req.containers))
        if dropped:
            log.warning("Synchronize: more than %d pods or containers; dropping %d objects",
                        MAX_SYNC_OBJECTS, dropped)
        if req.more:
            return api.SynchronizeResponse(more=True)
        self._sync = _SyncBuffer()
        call = self.calls(None, "Synchronize", buffer.deadline, pods=buffer.pods,
                          containers=buffer.containers)
        task = asyncio.get_running_loop().create_task(self._late_bounded(call))
        updates: Sequence[api.ContainerUpdate] = ()
        try:
            async with asyncio.timeout_at(call.deadline):
                updates = _updates_of(await asyncio.shield(task))
        except TimeoutError:
            self._stats.deadline_misses += 1
            log.warning("Synchronize handler missed the deadline; answering now, "
                        "its updates will follow through UpdateContainers")
            self._deliver_late(task)
        except Exception:
            self._stats.handler_errors += 1
            log.exception("Synchronize handler failed; answering without updates")
        self._on_synchronized()
        log.info("synchronized %d pods, %d containers; %d updates",
                 len(call.pods), len(call.containers), len(updates))
        return api.SynchronizeResponse(update=list(updates), more=False)

    async def _late_bounded(self, call: EventCall) -> Answer:
        async with asyncio.timeout(LATE_SYNC_LIMIT_S):
            return await self._chain.handle(call)

    def _deliver_late(self, task: asyncio.Task[Answer]) -> None:
        async def wait_and_send() -> None:
            try:
                updates = _updates_of(await task)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("late Synchronize handler failed; no updates delivered")
                return
            self._defer(updates)
        follower = asyncio.get_running_loop().create_task(wait_and_send())
        self._late.add(follower)
        follower.add_done_callback(self._late.discard)

    # -- Shutdown --------------------------------------------------------------------

    async def shutdown_rpc(self, _req: api.Empty, _: Request) -> None:
        log.info("runtime sent Shutdown")


def _updates_of(answer: Answer) -> Sequence[api.ContainerUpdate]:
    """A Synchronize answer's updates; a rejection cannot fail a sync, so it only logs."""
    if answer.reject is not None:
        log.warning("Synchronize rejected by handler: %s", answer.reject)
        return ()
    if isinstance(answer.response, api.SynchronizeResponse):
        return answer.response.update
    return ()


def _extend_bounded(buffer: list[T], items: Sequence[T]) -> int:
    """Append what fits under MAX_SYNC_OBJECTS; returns how many did not."""
    room = max(0, MAX_SYNC_OBJECTS - len(buffer))
    buffer.extend(items[:room])
    return max(0, len(items) - room)
