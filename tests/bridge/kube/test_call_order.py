"""kubelet's order of CRI calls (bridge.kube.call_order), fed outcomes as the players feed it:
the whole order when every call succeeds, and what a failed call stops."""

from __future__ import annotations

from collections.abc import Container

from bridge.kube import CallStep, NodeSpec, kubelet_order, parse_documents, pods_of, translate

POD = """\
kind: Pod
metadata: {name: p}
spec:
  initContainers:
    - {name: migrate, image: i}
    - {name: proxy, image: i, restartPolicy: Always}
    - {name: agent, image: i, restartPolicy: Always}
  containers:
    - {name: app, image: i}
    - {name: worker, image: i}
"""


def play(failing: Container[tuple[str, str | None]] = ()) -> tuple[list[str], dict[str, str]]:
    """The steps as `call container` strings, failing the (call, container) pairs given."""
    ((where, doc),) = parse_documents(POD, "p.yaml")
    (pod,) = pods_of(doc, where)
    order = kubelet_order(translate(pod, NodeSpec()))
    seen: list[str] = []
    step: CallStep = next(order)
    while True:
        seen.append(f"{step.call} {step.container or ''}".strip())
        try:
            step = order.send((step.call, step.container) not in failing)
        except StopIteration as done:
            return seen, done.value


def test_every_call_succeeds() -> None:
    steps, not_started = play()
    assert steps == [
        "RunPodSandbox",
        "CreateContainer migrate", "StartContainer migrate", "snapshot migrate",
        "StopContainer migrate",  # an init container exits before the next starts
        "CreateContainer proxy", "StartContainer proxy", "snapshot proxy",
        "CreateContainer agent", "StartContainer agent", "snapshot agent",
        "CreateContainer app", "StartContainer app", "snapshot app",
        "CreateContainer worker", "StartContainer worker", "snapshot worker",
        # every container in place (a player of several pods holds each here until all are):
        # the effective values of those still running
        "in-place",
        "snapshot proxy", "snapshot agent", "snapshot app", "snapshot worker",
        # regular containers stopped, then the sidecars in reverse order
        "StopContainer app", "StopContainer worker", "StopContainer agent",
        "StopContainer proxy",
        "StopPodSandbox",
        *(f"RemoveContainer {n}" for n in ("migrate", "proxy", "agent", "app", "worker")),
        "RemovePodSandbox",
    ]
    assert not_started == {}


def test_a_sandbox_that_was_not_created_stops_the_pod() -> None:
    steps, not_started = play({("RunPodSandbox", None)})
    assert steps == ["RunPodSandbox"]
    assert not_started == dict.fromkeys(["migrate", "proxy", "agent", "app", "worker"],
                                        "the pod sandbox was not created")


def test_a_sidecar_that_was_not_created_stops_everything_after_it() -> None:
    steps, not_started = play({("CreateContainer", "proxy")})
    assert "CreateContainer agent" not in steps and "CreateContainer app" not in steps
    assert not_started == dict.fromkeys(["agent", "app", "worker"],
                                        "init container proxy was not created")
    assert steps[-3:] == ["StopPodSandbox", "RemoveContainer migrate", "RemovePodSandbox"]


def test_an_init_container_that_did_not_start_stops_the_rest_but_is_removed() -> None:
    steps, not_started = play({("StartContainer", "migrate")})
    assert steps[:4] == ["RunPodSandbox", "CreateContainer migrate", "StartContainer migrate",
                         "snapshot migrate"]
    assert "StopContainer migrate" not in steps  # it never ran
    assert "RemoveContainer migrate" in steps
    assert set(not_started) == {"proxy", "agent", "app", "worker"}


def test_a_regular_container_that_failed_blocks_nothing() -> None:
    steps, not_started = play({("CreateContainer", "app"), ("StartContainer", "worker")})
    assert "StartContainer app" not in steps and "RemoveContainer app" not in steps
    assert "StopContainer worker" not in steps and "RemoveContainer worker" in steps
    assert not_started == {}
