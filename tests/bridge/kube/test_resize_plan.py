"""kubelet's resize order (bridge.kube.resize.resize_steps, from kubelet's doPodResizeAction and
updatePodContainerResources): memory then CPU, one CRI call per container and resource, the
memory call with the CPU values kubelet last set, shrinking containers first, the pod cgroup
before the containers when it grows and after them when it shrinks."""

from __future__ import annotations

from bridge.kube.resize import (
    CPU,
    LIMIT,
    MEMORY,
    POD,
    REQUEST,
    KubeletView,
    parse_resize,
    resize_steps,
)

MI = 1 << 20


def view(milli: int, mem_mi: int) -> KubeletView:
    return KubeletView(cpu_shares=milli * 1024 // 1000, cpu_quota=milli * 100,
                       cpu_period=100_000, memory_limit=mem_mi * MI)


def described(current: dict[str, KubeletView], *texts: str) -> list[str]:
    return [s.describe() for s in resize_steps(current, [parse_resize(t) for t in texts])]


def test_memory_first_with_the_old_cpu_then_cpu_with_the_new_memory() -> None:
    steps = resize_steps({"app": view(500, 256)}, [parse_resize("app=cpu:1,memory:512Mi")])
    assert [(s.resource, s.container) for s in steps] == [
        (MEMORY, POD), (MEMORY, "app"), (CPU, POD), (CPU, POD), (CPU, "app")]
    memory, cpu = steps[1].request, steps[4].request
    assert memory == view(500, 512)  # the intermediate state: new memory, old CPU
    assert cpu == view(1000, 512)
    assert [s.pod_value for s in steps if s.container == POD] == [LIMIT, LIMIT, REQUEST]


def test_a_shrink_sets_the_pod_cgroup_after_the_container_request_before_limit() -> None:
    assert described({"app": view(1000, 512)}, "app=cpu:500m,memory:256Mi") == [
        "app memory", "pod cgroup memory limit",
        "app cpu", "pod cgroup cpu request", "pod cgroup cpu limit"]


def test_only_the_resource_that_changes_gets_a_call() -> None:
    assert described({"app": view(500, 256)}, "app=cpu:1") == [
        "pod cgroup cpu limit", "pod cgroup cpu request", "app cpu"]
    assert described({"app": view(500, 256)}, "app=memory:256Mi") == []


def test_shrinking_containers_go_before_growing_ones() -> None:
    current = {"a": view(500, 256), "b": view(1000, 512), "c": view(1000, 512)}
    got = described(current, "a=memory:512Mi", "b=memory:256Mi", "c=memory:128Mi")
    # kubelet prepends each shrinking container (c before b), appends growing ones; the pod's
    # sum shrinks (1280Mi -> 896Mi): its limit after the containers.
    assert got == ["c memory", "b memory", "a memory", "pod cgroup memory limit"]


def test_no_pod_limit_when_a_container_has_none() -> None:
    current = {"app": view(500, 256), "side": KubeletView(cpu_shares=2)}
    assert described(current, "app=cpu:1") == ["pod cgroup cpu request", "app cpu"]
