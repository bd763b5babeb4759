"""The handler interface the NRI plugin core calls: one async method per event.

Handlers receive the event's request message (for events that arrived through
StateChange the core builds the dedicated request type, so a handler never
sees how an event was delivered) and an `EventContext` with the deadline. They
return the event's response message, or None for "no change".

A handler must not await UpdateContainers itself (the runtime holds its lock
while it waits for our answer, protocol §4.7); it hands updates to
`ctx.defer_updates`, which sends them after the answer.

Raising `EventRejected` fails the operation with that reason. Any other
exception is a bug: the core logs it and answers "no change".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bridge.contract.catalogue import Event
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
class EventContext:
    event: Event | None  # None for Synchronize
    name: str  # RPC name, e.g. "CreateContainer" or "Synchronize"
    uid: str
    deadline: float  # event-loop time by which the answer must be written
    runtime: RuntimeInfo
    via_state_change: bool
    defer_updates: Callable[[Sequence[api.ContainerUpdate]], None]


def log_subject(req: Any) -> dict[str, str]:
    """Structured log fields naming what an event is about: pod, container, container id."""
    out: dict[str, str] = {}
    if req.HasField("pod"):
        out["pod"] = f"{req.pod.namespace}/{req.pod.name}"
    if "container" in req.DESCRIPTOR.fields_by_name and req.HasField("container"):
        out["container"] = req.container.name
        out["container_id"] = req.container.id
    return out


class Handler:
    """Base class: every method answers "no change". Override what you need."""

    def wanted_events(self) -> frozenset[Event]:
        """Events to subscribe to; by default those whose method is overridden."""
        return frozenset(
            event for event, attr in HANDLER_METHODS.items()
            if getattr(type(self), attr) is not getattr(Handler, attr)
        )

    async def configure(self, runtime: RuntimeInfo) -> None:
        return None

    async def synchronize(
        self, ctx: EventContext, pods: Sequence[api.PodSandbox],
        containers: Sequence[api.Container],
    ) -> Sequence[api.ContainerUpdate]:
        return ()

    async def run_pod_sandbox(self, ctx: EventContext, req: api.RunPodSandboxRequest) -> None:
        return None

    async def update_pod_sandbox(self, ctx: EventContext, req: api.UpdatePodSandboxRequest) -> None:
        return None

    async def post_update_pod_sandbox(
        self, ctx: EventContext, req: api.PostUpdatePodSandboxRequest) -> None:
        return None

    async def stop_pod_sandbox(self, ctx: EventContext, req: api.StopPodSandboxRequest) -> None:
        return None

    async def remove_pod_sandbox(self, ctx: EventContext, req: api.RemovePodSandboxRequest) -> None:
        return None

    async def create_container(
        self, ctx: EventContext, req: api.CreateContainerRequest,
    ) -> api.CreateContainerResponse | None:
        return None

    async def post_create_container(
        self, ctx: EventContext, req: api.PostCreateContainerRequest) -> None:
        return None

    async def start_container(self, ctx: EventContext, req: api.StartContainerRequest) -> None:
        return None

    async def post_start_container(
        self, ctx: EventContext, req: api.PostStartContainerRequest) -> None:
        return None

    async def update_container(
        self, ctx: EventContext, req: api.UpdateContainerRequest,
    ) -> api.UpdateContainerResponse | None:
        return None

    async def post_update_container(
        self, ctx: EventContext, req: api.PostUpdateContainerRequest) -> None:
        return None

    async def stop_container(
        self, ctx: EventContext, req: api.StopContainerRequest,
    ) -> api.StopContainerResponse | None:
        return None

    async def remove_container(self, ctx: EventContext, req: api.RemoveContainerRequest) -> None:
        return None

    async def validate_container_adjustment(
        self, ctx: EventContext, req: api.ValidateContainerAdjustmentRequest,
    ) -> api.ValidateContainerAdjustmentResponse | None:
        return None


# The Handler method for each event is the event's name in snake case.
HANDLER_METHODS: dict[Event, str] = {event: event.name.lower() for event in Event}


class UniformHandler(Handler):
    """Base for handlers that treat every event they do not override alike.

    Each per-event method calls `on_event(ctx, req)` and answers "no change";
    a subclass overrides `on_event`, the methods whose answer matters, and
    `wanted_events` (by default every event but validation, which would make
    the plugin a validator).
    """

    def wanted_events(self) -> frozenset[Event]:
        return frozenset(Event) - {Event.VALIDATE_CONTAINER_ADJUSTMENT}

    async def on_event(self, ctx: EventContext, req: Any) -> None:
        return None


def _uniform(attr: str) -> Any:
    async def method(self: UniformHandler, ctx: EventContext, req: Any) -> None:
        await self.on_event(ctx, req)
    method.__name__ = attr
    return method


for _attr in HANDLER_METHODS.values():
    setattr(UniformHandler, _attr, _uniform(_attr))
