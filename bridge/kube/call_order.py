"""The order of kubelet's CRI calls for one pod, as a sans-IO generator both players drive.

Owns: which CRI call comes next given how the previous ones went — RunPodSandbox; each init
container created, started and (it exits) stopped before the next; a sidecar (restartPolicy
Always) created and started and left running; the regular containers created and started; then
`IN_PLACE` (a player of several pods holds each pod here until all are); then
the teardown: regular containers stopped, sidecars stopped in reverse order, StopPodSandbox,
RemoveContainer for every created container, RemovePodSandbox. A failed call stops what kubelet
would not get past: a sandbox that was not created stops the pod; an init container or sidecar
that was not created or did not start stops every container after it. It also says when to take
a container's effective values (`SNAPSHOT`): right after its start, and for the containers still
running once every container is in place.

`nri-webhook-bridge try` (bridge.trial.play, over the simulated runtime) and the test kit's
`send_pod` (policy_server.testing.pods, in-process) drive the same generator, so the two play
one order. Must not: make a call, or know what a call does.

    order = kubelet_order(pod)
    step = next(order)
    while True:                      # StopIteration.value: containers never started, and why
        step = order.send(perform(step))
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

from bridge.kube.cri_config import CriPod
from bridge.kube.pod_spec import ContainerKind

SNAPSHOT = "snapshot"  # not a CRI call: take the container's effective values now
# Not a CRI call either: every container of the pod that will run is in place. A player of
# several pods brings each to here before any goes on (pods share the node until the end).
IN_PLACE = "in-place"


@dataclass(frozen=True, slots=True)
class CallStep:
    """One CRI call (`RunPodSandbox`, `CreateContainer`, ...) or a SNAPSHOT; `container` is the
    container's name, None for the pod's calls."""

    call: str
    container: str | None = None


# The generator yields a CallStep, takes whether it succeeded (ignored for teardown and SNAPSHOT
# steps), and returns {container name: why kubelet never got to it}.
Order = Generator[CallStep, bool, dict[str, str]]


def kubelet_order(pod: CriPod) -> Order:
    """See the module docstring."""
    if not (yield CallStep("RunPodSandbox")):
        return {c.name: "the pod sandbox was not created" for c in pod.containers}
    not_started: dict[str, str] = {}
    blocked: str | None = None
    created: list[str] = []
    running: list[tuple[str, ContainerKind]] = []
    for spec in pod.containers:
        if blocked is not None:
            not_started[spec.name] = blocked
            continue
        gate = spec.kind is not ContainerKind.REGULAR  # kubelet waits for it before the next
        if not (yield CallStep("CreateContainer", spec.name)):
            if gate:
                blocked = f"init container {spec.name} was not created"
            continue
        created.append(spec.name)
        started = yield CallStep("StartContainer", spec.name)
        yield CallStep(SNAPSHOT, spec.name)
        if not started:
            if gate:
                blocked = f"init container {spec.name} did not start"
        elif spec.runs_to_completion:
            yield CallStep("StopContainer", spec.name)  # it exits; the runtime reports the stop
        else:
            running.append((spec.name, spec.kind))
    yield CallStep(IN_PLACE)
    for name, _ in running:  # the effective values once every container is in place
        yield CallStep(SNAPSHOT, name)
    regular = [n for n, kind in running if kind is ContainerKind.REGULAR]
    sidecars = [n for n, kind in running if kind is not ContainerKind.REGULAR]
    for name in [*regular, *reversed(sidecars)]:
        yield CallStep("StopContainer", name)
    yield CallStep("StopPodSandbox")
    for name in created:
        yield CallStep("RemoveContainer", name)
    yield CallStep("RemovePodSandbox")
    return not_started
