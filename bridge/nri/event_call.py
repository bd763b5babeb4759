"""The one event path's values: an immutable EventCall in, an Answer out.

Every NRI event (and Synchronize) reaches the plugin's handling as one `EventCall`, and every
piece of handling — the state cache, the deadline guard, recording, webhooks, the static handler —
is an `EventHandler`: `await handler.handle(call) -> Answer`. Wrappers (`Layer`) hold the next
handler and call it, the way httpx stacks transports, so the path is one call deep per layer and
nothing is patched after construction. `bridge.nri.handler_api` adapts per-event methods (the
style of NRI's Go stub) onto this interface.

Owns the values and the protocol. Must not know about sockets, ttrpc, webhooks or HTTP.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from google.protobuf.message import Message

from bridge.contract.catalogue import NriEvent
from bridge.contract.nri_version import Version
from bridge.errors import BridgeError
from bridge.proto.nri import api_pb2 as api


class EventRejected(BridgeError):
    """A handler's deliberate refusal; the runtime gets an error with `reason`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class RuntimeInfo:
    name: str
    version: str
    nri_version: Version | None
    config: str
    registration_timeout_s: float
    request_timeout_s: float


@dataclass(frozen=True, slots=True)
class EventCall:
    """One event to handle. For Synchronize `event` and `request` are None and the whole
    state is in `pods` and `containers`; for every other event `request` is the event's request
    message (the dedicated type also when the event came through StateChange)."""

    event: NriEvent | None  # None for Synchronize
    name: str  # RPC name, e.g. "CreateContainer" or "Synchronize"
    uid: str
    deadline: float  # event-loop time by which the answer must be written
    runtime: RuntimeInfo
    via_state_change: bool
    # Updates for *other* containers go here, never to UpdateContainers directly: the runtime
    # holds its lock while it waits for our answer
    # (docs/protocol.md#updatecontainers-and-the-runtimes-lock).
    defer_updates: Callable[[Sequence[api.ContainerUpdate]], None]
    request: Message | None = None
    pods: Sequence[api.PodSandbox] = ()
    containers: Sequence[api.Container] = ()


# The stub-style handler methods take the call as their context argument.
EventContext = EventCall


@dataclass(frozen=True, slots=True)
class Answer:
    """What the runtime gets: the event's response message (None: no change; for Synchronize a
    SynchronizeResponse carrying the updates), or a rejection that fails the operation."""

    response: Message | None = None
    reject: str | None = None


NO_CHANGE = Answer()


class EventHandler(Protocol):
    def wanted_events(self) -> frozenset[NriEvent]:
        """Events to subscribe to; asked once per connection, after configure()."""
        ...

    async def configure(self, runtime: RuntimeInfo) -> None: ...

    async def handle(self, call: EventCall) -> Answer: ...


class Layer:
    """A handler around another one. Passes calls for events the inner handler did not ask
    for around it (Synchronize always goes through)."""

    def __init__(self, inner: EventHandler) -> None:
        self.inner = inner
        self._inner_wants: frozenset[NriEvent] = frozenset()

    def wanted_events(self) -> frozenset[NriEvent]:
        self._inner_wants = self.inner.wanted_events()
        return self._inner_wants

    async def configure(self, runtime: RuntimeInfo) -> None:
        await self.inner.configure(runtime)

    def inner_wants(self, call: EventCall) -> bool:
        return call.event is None or call.event in self._inner_wants
