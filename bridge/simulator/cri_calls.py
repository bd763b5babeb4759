"""CRI calls as a runtime turns them into NRI events.

One CRI call becomes one to three NRI events, in this order (recorded from
containerd 1.7.24-2.3.4 and CRI-O 1.36.3, bridge/simulator/scenarios): CreateContainer ->
CreateContainer (+ validation, v0.10+) then PostCreateContainer; StartContainer
-> StartContainer then PostStartContainer; UpdateContainerResources ->
UpdateContainer then PostUpdateContainer; UpdatePodSandboxResources ->
UpdatePodSandbox then PostUpdatePodSandbox, where the profile says so
(containerd 2.2.x: CRI unimplemented; CRI-O: no post-event). A failed
pre-event fails the CRI call: its post-event is not sent.

Owns: that mapping and running it. Must not: decide how an event is delivered
(dispatch.py) or what a runtime build supports (profiles.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from bridge.contract.catalogue import Event
from bridge.proto.nri import api_pb2 as api
from bridge.simulator.delivery import EventResult
from bridge.simulator.runtime import SimulatedRuntime, SimulatorError

CRI_EVENTS: dict[str, tuple[Event, ...]] = {
    "RunPodSandbox": (Event.RUN_POD_SANDBOX,),
    "StopPodSandbox": (Event.STOP_POD_SANDBOX,),
    "RemovePodSandbox": (Event.REMOVE_POD_SANDBOX,),
    "UpdatePodSandboxResources": (Event.UPDATE_POD_SANDBOX, Event.POST_UPDATE_POD_SANDBOX),
    "CreateContainer": (Event.CREATE_CONTAINER, Event.POST_CREATE_CONTAINER),
    "StartContainer": (Event.START_CONTAINER, Event.POST_START_CONTAINER),
    "UpdateContainerResources": (Event.UPDATE_CONTAINER, Event.POST_UPDATE_CONTAINER),
    "StopContainer": (Event.STOP_CONTAINER,),
    "RemoveContainer": (Event.REMOVE_CONTAINER,),
}


class CriUnimplemented(SimulatorError):
    """The runtime build has no NRI path for this CRI call (containerd 2.2: pod resize)."""


@dataclass(frozen=True, slots=True)
class CriResult:
    call: str
    events: tuple[EventResult, ...]

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.events)

    @property
    def error(self) -> str | None:
        return next((r.error for r in self.events if r.error is not None), None)

    @property
    def container(self) -> api.Container | None:
        """The container as the runtime has it after the call (CreateContainer: adjusted)."""
        return next((r.container for r in reversed(self.events) if r.container is not None),
                    None)


async def run_cri(runtime: SimulatedRuntime, call: str, pod: api.PodSandbox,
                  container: api.Container | None = None, *,
                  linux_resources: api.LinuxResources | None = None,
                  overhead_linux_resources: api.LinuxResources | None = None) -> CriResult:
    """Run one CRI call's NRI events through the runtime's plugins."""
    try:
        events = CRI_EVENTS[call]
    except KeyError:
        raise SimulatorError(f"unknown CRI call {call!r}; known: {', '.join(CRI_EVENTS)}",
                             ) from None
    delivered = [e for e in events if runtime.profile.delivers(e)]
    if not delivered:
        raise CriUnimplemented(f"{runtime.profile.key}: CRI {call} does not reach NRI "
                               "(unimplemented by this runtime)")
    results: list[EventResult] = []
    for event in delivered:
        result = await runtime.run_event(event, pod, container, linux_resources=linux_resources,
                                         overhead_linux_resources=overhead_linux_resources)
        results.append(result)
        if not result.ok:
            break
        if result.container is not None:
            container = result.container  # post-events see the container as created/updated
    return CriResult(call, tuple(results))
