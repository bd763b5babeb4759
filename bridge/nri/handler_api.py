"""The per-event adapter: NRI's stub style (one async method per event) on the one event path.

`Handler` is an `EventHandler` whose `handle(call)` calls the method named after the event
(`create_container(ctx, req)`, ...; the context is the EventCall itself) and turns its return
value into an Answer. For people who prefer writing a method per event; the built-in handlers
implement `handle` directly.

Methods receive the event's request message (for events that arrived through StateChange the
core builds the dedicated request type, so a handler never sees how an event was delivered)
and return the event's response message, or None for "no change". Raising `EventRejected`
fails the operation with that reason. Any other exception is a bug: the core logs it and
answers "no change". A handler must not await UpdateContainers itself (the runtime holds its
lock while it waits for our answer, docs/protocol.md#updatecontainers-and-the-runtimes-lock); it
hands updates to `ctx.defer_updates`.
"""

from __future__ import annotations

from collections.abc import Sequence

from google.protobuf.message import Message

from bridge.contract.catalogue import NriEvent
from bridge.nri.event_call import (
    Answer,
    EventCall,
    EventContext,
    EventRejected,
    RuntimeInfo,
)
from bridge.proto.nri import api_pb2 as api

__all__ = ["HANDLER_METHODS", "EventContext", "EventRejected", "Handler", "RuntimeInfo"]


class Handler:
    """Base class: every method answers "no change". Override what you need."""

    def wanted_events(self) -> frozenset[NriEvent]:
        """Events to subscribe to; by default those whose method is overridden."""
        return frozenset(
            event for event, attr in HANDLER_METHODS.items()
            if getattr(type(self), attr) is not getattr(Handler, attr)
        )

    async def configure(self, runtime: RuntimeInfo) -> None:
        return None

    async def handle(self, call: EventCall) -> Answer:
        try:
            if call.event is None:
                updates = await self.synchronize(call, call.pods, call.containers)
                return Answer(api.SynchronizeResponse(update=updates))
            method = getattr(self, HANDLER_METHODS[call.event])
            response: Message | None = await method(call, call.request)
        except EventRejected as exc:
            return Answer(reject=exc.reason)
        return Answer(response)

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
HANDLER_METHODS: dict[NriEvent, str] = {event: event.name.lower() for event in NriEvent}
