"""Running one CRI call on the simulated runtime: its NRI events, through every plugin.

Which events a CRI call becomes is the runtime's fact (bridge.runtime_facts.cri_events); the
profile says which of them this runtime build sends. The events run in order; a failed
pre-event fails the CRI call and its post-event is not sent; a post-event sees the container as
the pre-event left it.

Owns: running that sequence (`run_cri`) and its result (`CriResult`). Must not: decide how an
event is delivered (delivery.py) or what a runtime build supports (its profile).
"""

from __future__ import annotations

from dataclasses import dataclass

from bridge.proto.nri import api_pb2 as api
from bridge.runtime_facts.cri_events import CRI_EVENTS
from bridge.simulator.delivery import EventResult
from bridge.simulator.runtime import SimulatedRuntime
from bridge.simulator.simulator_error import SimulatorError


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
