"""Delivering one lifecycle event to the plugins and combining their answers.

This is the adaptation's per-event logic (docs/protocol.md#how-events-are-delivered,
docs/protocol.md#when-the-runtime-drops-a-plugin, docs/protocol.md#ownership-and-conflicts):
- only subscribed plugins are called, in ascending index order, each with the
  full request timeout;
- delivery: older runtimes send nine events as `StateChange`; a v0.12+
  runtime uses the dedicated RPC and, on an Unimplemented answer, switches
  that plugin to StateChange for good and re-sends;
- a fatal failure (local deadline, closed connection, protocol error) closes
  the plugin and the event continues without it (fail-open); an error status
  fails the operation, later plugins are not called, the plugin stays;
- CreateContainer responses are merged (`merge.CreateResult`), then validated
  by validator plugins (v0.10+, concurrently, fail-closed).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import Message

from bridge.contract.applied_view import as_applied
from bridge.contract.catalogue import RESPONSE_TYPES, SPEC_OF, NriEvent, updates_in
from bridge.contract.resource_overlay import overlay_resources
from bridge.contract.runtime_effects import Route
from bridge.proto.nri import api_pb2 as api
from bridge.runtime_facts.apply import apply_adjustment
from bridge.runtime_facts.profiles import RuntimeProfile
from bridge.simulator.connection import (
    PluginConnection,
    PluginFailed,
    PluginFatal,
    decode_message,
)
from bridge.simulator.default_validator import LABEL as DEFAULT_VALIDATOR
from bridge.simulator.default_validator import DefaultValidator
from bridge.simulator.ownership import Ownership
from bridge.simulator.result_merge import CreateResult, MergeError, UpdateResult
from bridge.wire.status import Code

log = logging.getLogger(__name__)

# Events that v0.12+ delivers through a dedicated RPC with a StateChange
# fallback, and that older runtimes always deliver through StateChange.
FALLBACK_EVENTS = frozenset({
    NriEvent.RUN_POD_SANDBOX, NriEvent.STOP_POD_SANDBOX, NriEvent.REMOVE_POD_SANDBOX,
    NriEvent.POST_CREATE_CONTAINER, NriEvent.START_CONTAINER, NriEvent.POST_START_CONTAINER,
    NriEvent.POST_UPDATE_CONTAINER, NriEvent.REMOVE_CONTAINER, NriEvent.POST_UPDATE_POD_SANDBOX,
})


@dataclass(frozen=True, slots=True)
class EventResult:
    """What one lifecycle operation produced.

    `latency_s` covers the whole runtime-side operation, `rpc_s` only the
    plugin round trips within it. `response` is the merged result in the event's response type (for
    CreateContainer the merged adjustment and updates; for UpdateContainer the
    updates with the effective one last), `container` the container as the
    runtime ends up with it, `error` why the operation failed (None if it
    succeeded). `responses` holds each plugin's own decoded answer.
    """

    event: str
    latency_s: float
    response: Message | None = None
    container: api.Container | None = None
    error: str | None = None
    responses: tuple[tuple[str, Message | None], ...] = ()
    updates: tuple[api.ContainerUpdate, ...] = field(default=())
    rpc_s: float = 0.0  # time spent waiting for plugins (request written -> answer read)

    @property
    def ok(self) -> bool:
        return self.error is None


def request_container(request: Any) -> api.Container | None:
    """The request's container, or None for pod events."""
    if "container" in request.DESCRIPTOR.fields_by_name and request.HasField("container"):
        container: api.Container = request.container
        return container
    return None


CloseFn = Callable[[PluginConnection, str], None]


class Dispatcher:
    """Runs events against a list of plugins for one runtime profile."""

    def __init__(self, profile: RuntimeProfile, request_timeout_s: float, close: CloseFn,
                 all_plugins: Callable[[], Sequence[PluginConnection]],
                 default_validator: DefaultValidator | None = None) -> None:
        self.profile = profile
        self.default_validator = default_validator
        self.request_timeout_s = request_timeout_s
        self._close = close
        self._all_plugins = all_plugins

    def supports(self, event: NriEvent) -> bool:
        return self.profile.delivers(event)

    # -- delivery ---------------------------------------------------------------------

    async def deliver(self, conn: PluginConnection, event: NriEvent,
                      request: Any) -> Message | None:
        """Send one event to one plugin; returns its decoded response (None via StateChange)."""
        if event in FALLBACK_EVENTS and (not self.profile.dedicated_rpcs or conn.use_state_change):
            change = api.StateChangeEvent(event=event.proto)
            if request.HasField("pod"):
                change.pod.CopyFrom(request.pod)
            container = request_container(request)
            if container is not None:
                change.container.CopyFrom(container)
            await conn.call("StateChange", change.SerializeToString(), self.request_timeout_s)
            return None
        try:
            payload = await conn.call(event.rpc_name, request.SerializeToString(),
                                      self.request_timeout_s)
        except PluginFailed as exc:
            if (exc.code == Code.UNIMPLEMENTED and event in FALLBACK_EVENTS
                    and self.profile.dedicated_rpcs):
                log.warning("plugin %s does not implement %s; switching it to StateChange "
                            "(deprecated)", conn.label, event.rpc_name)
                conn.use_state_change = True
                return await self.deliver(conn, event, request)
            raise
        return decode_message(RESPONSE_TYPES[event], payload)

    async def _timed(self, clock: list[float], conn: PluginConnection, event: NriEvent,
                     request: Any) -> Message | None:
        started = time.perf_counter()
        try:
            return await self.deliver(conn, event, request)
        finally:
            clock[0] += time.perf_counter() - started

    def _targets(self, plugins: Sequence[PluginConnection],
                 event: NriEvent) -> list[PluginConnection]:
        return [p for p in plugins if p.is_active and p.subscribed(event)]

    # -- event flows --------------------------------------------------------------------

    async def run(self, event: NriEvent, plugins: Sequence[PluginConnection], request: Any,
                  ) -> EventResult:
        """Run `request` (one of REQUEST_TYPES) through the subscribed plugins."""
        started = time.perf_counter()
        clock = [0.0]
        if event is NriEvent.CREATE_CONTAINER:
            assert isinstance(request, api.CreateContainerRequest)
            return await self._create(plugins, request, started, clock)
        responses: list[tuple[str, Message | None]] = []
        owners = Ownership()
        pending: api.ContainerUpdate | None = None
        if event is NriEvent.UPDATE_CONTAINER:
            pending = api.ContainerUpdate(container_id=request.container.id)
            pending.linux.resources.CopyFrom(request.linux_resources)
        updates = UpdateResult(owners, pending=pending)
        for conn in self._targets(plugins, event):
            try:
                response = await self._timed(clock, conn, event, request)
            except PluginFatal as exc:
                self._close(conn, str(exc))
                continue
            except PluginFailed as exc:
                return self._failed(event, started, f"plugin {conn.label}: {exc.message}",
                                    responses)
            responses.append((conn.label, response))
            if response is not None and SPEC_OF[event].carries_update:
                try:
                    updates.add(conn.label, updates_in(response))
                except MergeError as exc:
                    return self._failed(event, started, str(exc), responses)
        merged = updates.result()
        container = self._container_after(request, pending)
        if SPEC_OF[event].carries_update:  # UpdateContainer, StopContainer
            out: Message | None = SPEC_OF[event].response_type(update=merged)
        else:
            out = responses[-1][1] if responses else None
        others = tuple(u for u in merged if pending is None or u is not pending)
        return EventResult(event.rpc_name, time.perf_counter() - started, out, container, None,
                           tuple(responses), others, clock[0])

    async def _create(self, plugins: Sequence[PluginConnection],
                      request: api.CreateContainerRequest, started: float,
                      clock: list[float]) -> EventResult:
        event = NriEvent.CREATE_CONTAINER
        original = api.Container()
        original.CopyFrom(request.container)
        # Later plugins see earlier changes; RuntimeCrashed propagates: the runtime is gone.
        result = CreateResult(request.container, self.profile.hazards)
        responses: list[tuple[str, Message | None]] = []
        for conn in self._targets(plugins, event):
            try:
                response = await self._timed(clock, conn, event, request)
            except PluginFatal as exc:
                self._close(conn, str(exc))
                continue
            except PluginFailed as exc:
                return self._failed(event, started, f"plugin {conn.label}: {exc.message}",
                                    responses)
            responses.append((conn.label, response))
            assert isinstance(response, api.CreateContainerResponse)
            try:
                result.apply(conn.label, response)
            except MergeError as exc:
                return self._failed(event, started, str(exc), responses)
        merged = result.response()
        refusal = await self._validate(plugins, request.pod, original, merged, result.owners)
        if refusal is not None:
            return self._failed(event, started, refusal, responses)
        container = apply_adjustment(original, merged.adjust, self.profile.runtime)
        container.state = api.CONTAINER_CREATED
        return EventResult(event.rpc_name, time.perf_counter() - started, merged, container, None,
                           tuple(responses), tuple(merged.update), clock[0])

    async def _validate(self, plugins: Sequence[PluginConnection], pod: api.PodSandbox,
                        original: api.Container, merged: api.CreateContainerResponse,
                        owners: Ownership) -> str | None:
        """Run validators concurrently (v0.10+); returns why creation fails, or None."""
        event = NriEvent.VALIDATE_CONTAINER_ADJUSTMENT
        validators = self._targets(plugins, event) if self.supports(event) else []
        builtin = self.default_validator if self.supports(event) else None
        if not validators and builtin is None:
            return None
        active = [p for p in self._all_plugins() if p.is_active]
        if builtin is not None:
            refusal = builtin.refusal(pod, original, ((p.name, p.index) for p in active))
            if refusal is not None:
                return (f'validator "{DEFAULT_VALIDATOR}" rejected container adjustment, '
                        f"reason: {refusal}")
        request = api.ValidateContainerAdjustmentRequest(
            pod=pod, container=original, adjust=merged.adjust, update=merged.update,
            owners=owners.to_proto(),
            plugins=([builtin.instance()] if builtin is not None else [])
            + [api.PluginInstance(name=p.name, index=p.index) for p in active],
        )
        # The adaptation merges into an adjustment whose hooks, memory, cpu (and, from
        # v0.11, rdt) sections already exist, so validators see them present even
        # when empty (recorded: containerd 2.2.7 / 2.3.4 / 2.4.0-beta.0, CRI-O 1.36.3).
        request.adjust.hooks.SetInParent()
        request.adjust.linux.resources.memory.SetInParent()
        request.adjust.linux.resources.cpu.SetInParent()
        if self.profile.nri >= (0, 11, 0):
            request.adjust.linux.rdt.SetInParent()
        outcomes = await asyncio.gather(
            *(self.deliver(v, event, request) for v in validators), return_exceptions=True)
        for conn, outcome in zip(validators, outcomes, strict=True):
            if isinstance(outcome, PluginFatal):
                self._close(conn, str(outcome))
                return f"validator {conn.label} failed: {outcome}"
            if isinstance(outcome, PluginFailed):
                return f"validator {conn.label} failed: {outcome.message}"
            if isinstance(outcome, BaseException):
                raise outcome
            if isinstance(outcome, api.ValidateContainerAdjustmentResponse) and outcome.reject:
                return (f'validator "{conn.label}" rejected container adjustment, '
                        f"reason: {outcome.reason}")
        return None

    def _container_after(self, request: Any,
                         pending: api.ContainerUpdate | None) -> api.Container | None:
        current = request_container(request)
        if current is None:
            return None
        container = api.Container()
        container.CopyFrom(current)
        if pending is not None:
            # The runtime keeps of the effective update what it keeps of an UpdateContainer
            # reply (containerd: toCRIResources; bridge.contract.runtime_effects).
            applied = as_applied(pending, Route.UPDATE, self.profile.runtime).message
            overlay_resources(container.linux.resources, applied.linux.resources)
        return container

    @staticmethod
    def _failed(event: NriEvent, started: float, error: str,
                responses: list[tuple[str, Message | None]]) -> EventResult:
        log.warning("%s failed: %s", event.rpc_name, error)
        return EventResult(event.rpc_name, time.perf_counter() - started, error=error,
                           responses=tuple(responses))
