"""Running the simulated runtime's lifecycle events, under the runtime's one lock.

Owns: the lock that events, Synchronize and UpdateContainers share, as in containerd
(docs/protocol.md#updatecontainers-and-the-runtimes-lock; `serialize_events=False` drops it),
checking that an event can run (known, not ValidateContainerAdjustment on its own, on a profile
that has it, on a runtime that has not crashed), running it through the plugins
(bridge.simulator.delivery) and folding a successful result into the runtime's pods and
containers (bridge.simulator.state), and noticing a reply that crashes the runtime
(docs/protocol.md#reply-fields-that-crash-a-runtime): `crashed` says why until the runtime
restarts. Must not: close the socket or the plugins itself (the `on_crash` callback does) or
take part in a plugin's handshake (bridge.simulator.plugin_start).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from google.protobuf.message import Message

from bridge.contract.catalogue import EVENTS_BY_RPC, NriEvent
from bridge.proto.nri import api_pb2 as api
from bridge.runtime_facts.profiles import RuntimeProfile
from bridge.simulator.delivery import Dispatcher, EventResult
from bridge.simulator.event_request import event_request
from bridge.simulator.plugin_registry import PluginRegistry
from bridge.simulator.result_merge import RuntimeCrashed
from bridge.simulator.simulator_error import SimulatorError
from bridge.simulator.state import RuntimeState

log = logging.getLogger(__name__)


class EventRunner:
    """One runtime's events; see the module docstring."""

    def __init__(self, profile: RuntimeProfile, dispatcher: Dispatcher, registry: PluginRegistry,
                 state: RuntimeState, on_crash: Callable[[], Awaitable[None]], *,
                 serialize_events: bool) -> None:
        self.profile = profile
        self.dispatcher = dispatcher
        self.registry = registry
        self.state = state
        self.serialize_events = serialize_events
        self.crashed: str | None = None  # the panic that took the runtime down, until a restart
        self._on_crash = on_crash
        self._lock = asyncio.Lock()

    def event_lock(self) -> contextlib.AbstractAsyncContextManager[object]:
        if self.serialize_events:
            return self._lock
        return contextlib.nullcontext()

    async def run_event(
        self,
        event: NriEvent | str,
        pod: api.PodSandbox,
        container: api.Container | None = None,
        *,
        linux_resources: api.LinuxResources | None = None,
        overhead_linux_resources: api.LinuxResources | None = None,
    ) -> EventResult:
        """Run one lifecycle event through every subscribed plugin."""
        request = event_request(self._event(event), pod, container,
                                linux_resources=linux_resources,
                                overhead_linux_resources=overhead_linux_resources)
        return await self.run_request(event, request)

    async def run_request(self, event: NriEvent | str, request: Message) -> EventResult:
        """Run a ready-made request message (scenarios use this)."""
        kind = self._event(event)
        async with self.event_lock():
            try:
                result = await self.dispatcher.run(kind, self.registry.plugins, request)
            except RuntimeCrashed as exc:
                return await self._crash(kind, str(exc))
            if result.ok:
                self._fold(kind, request, result)
        return result

    def _fold(self, event: NriEvent, request: Message, result: EventResult) -> None:
        pod = getattr(request, "pod", None)
        container = result.container
        self.state.observe(event, pod, container)
        if event is NriEvent.UPDATE_CONTAINER and container is not None:
            current = self.state.containers.get(container.id)
            if current is not None:
                current.linux.resources.CopyFrom(container.linux.resources)
        for update in result.updates:  # a reply's updates of other containers
            if not self.state.apply_reply_update(update):
                log.info("%s: update of %s failed", event.rpc_name, update.container_id)

    def _event(self, event: NriEvent | str) -> NriEvent:
        if isinstance(event, str):
            try:
                event = EVENTS_BY_RPC[event]
            except KeyError:
                raise SimulatorError(f"unknown event {event!r}") from None
        if event is NriEvent.VALIDATE_CONTAINER_ADJUSTMENT:
            raise SimulatorError("validation runs as part of CreateContainer")
        if self.crashed is not None:
            raise SimulatorError(f"{self.profile.key} crashed: {self.crashed}")
        if not self.dispatcher.supports(event):
            raise SimulatorError(f"{self.profile.key} has no {event.rpc_name} "
                                 f"(NRI v{'.'.join(map(str, self.profile.nri))})")
        return event

    async def _crash(self, event: NriEvent, panic: str) -> EventResult:
        """The runtime process dies: no listener, no plugins."""
        log.error("simulated %s %s crashed during %s: %s", self.profile.runtime_name,
                  self.profile.runtime_version, event.rpc_name, panic)
        self.crashed = panic
        await self._on_crash()
        return EventResult(event.rpc_name, 0.0, error=f"runtime crashed: {panic}")
