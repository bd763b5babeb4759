"""kubelet's rules, value by value, against numbers worked out by hand from the rules in
docs/try.md (not from the code under test)."""

from __future__ import annotations

import textwrap

import pytest

from bridge.kube import NodeSpec, parse_documents, pods_of, translate
from bridge.kube.model import Pod
from bridge.kube.resources import QosClass, qos_class

GI = 1 << 30
MI = 1 << 20


def pod(text: str) -> Pod:
    (where, doc), = parse_documents(textwrap.dedent(text), "test.yaml")
    (p,) = pods_of(doc, where)
    return p


def containers_yaml(*resources: str, init: tuple[str, ...] = ()) -> str:
    def block(key: str, items: tuple[str, ...], prefix: str) -> str:
        if not items:
            return ""
        lines = [f"  {key}:"]
        for i, res in enumerate(items):
            lines.append(f"  - name: {prefix}{i}\n    image: busybox\n    resources: {res}")
        return "\n".join(lines) + "\n"
    return ("kind: Pod\nmetadata: {name: p, uid: 11111111-2222-3333-4444-555555555555}\n"
            "spec:\n" + block("initContainers", init, "i") + block("containers", resources, "c"))


@pytest.mark.parametrize(("resources", "init", "expected"), [
    (("{limits: {cpu: 1, memory: 1Gi}}",), (), QosClass.GUARANTEED),  # limits only
    (("{requests: {cpu: 1, memory: 1Gi}, limits: {cpu: 1, memory: 1Gi}}",), (),
     QosClass.GUARANTEED),
    (("{requests: {cpu: 500m, memory: 1Gi}, limits: {cpu: 1, memory: 1Gi}}",), (),
     QosClass.BURSTABLE),
    (("{limits: {cpu: 1}}",), (), QosClass.BURSTABLE),  # no memory limit
    (("{}",), (), QosClass.BEST_EFFORT),
    (("{requests: {hugepages-2Mi: 4Mi}, limits: {hugepages-2Mi: 4Mi}}",), (),
     QosClass.BEST_EFFORT),  # hugepages do not count
    (("{requests: {example.com/gpu: 1}, limits: {example.com/gpu: 1}}",), (),
     QosClass.BEST_EFFORT),  # nor extended resources
    (("{limits: {cpu: 1, memory: 1Gi}}",), ("{}",), QosClass.BURSTABLE),  # init counts
    (("{}",), ("{requests: {cpu: 100m}}",), QosClass.BURSTABLE),
    (("{limits: {cpu: 1, memory: 1Gi}}",), ("{limits: {cpu: 2, memory: 1Gi}}",),
     QosClass.GUARANTEED),
])
def test_qos_class(resources: tuple[str, ...], init: tuple[str, ...],
                   expected: QosClass) -> None:
    assert qos_class(pod(containers_yaml(*resources, init=init))) is expected


UID = "11111111-2222-3333-4444-555555555555"


@pytest.mark.parametrize(("resources", "driver", "parent"), [
    ("{limits: {cpu: 1, memory: 1Gi}}", "cgroupfs", f"/kubepods/pod{UID}"),
    ("{requests: {cpu: 1}}", "cgroupfs", f"/kubepods/burstable/pod{UID}"),
    ("{}", "cgroupfs", f"/kubepods/besteffort/pod{UID}"),
    ("{limits: {cpu: 1, memory: 1Gi}}", "systemd",
     "kubepods-pod11111111_2222_3333_4444_555555555555.slice"),
    ("{requests: {cpu: 1}}", "systemd",
     "kubepods-burstable-pod11111111_2222_3333_4444_555555555555.slice"),
    ("{}", "systemd", "kubepods-besteffort-pod11111111_2222_3333_4444_555555555555.slice"),
])
def test_cgroup_parent(resources: str, driver: str, parent: str) -> None:
    cri = translate(pod(containers_yaml(resources)), NodeSpec(cgroup_driver=driver))
    assert cri.cgroup_parent == parent


@pytest.mark.parametrize(("resources", "shares", "quota", "memory"), [
    # shares = milli * 1024 // 1000, at least 2; quota = milli * 100000 // 1000, at least 1000
    ("{requests: {cpu: 250m}}", 256, 0, 0),
    ("{requests: {cpu: 1.5}, limits: {cpu: 2.5}}", 1536, 250000, 0),
    ("{requests: {cpu: 1m}, limits: {cpu: 1m}}", 2, 1000, 0),  # tiny: both clamps
    ("{requests: {cpu: 0.0001}}", 2, 0, 0),  # 0.1m rounds up to 1m -> 1 share -> 2
    ("{requests: {cpu: 9m}, limits: {cpu: 9m}}", 9, 1000, 0),  # 900 us quota -> 1000
    ("{requests: {cpu: 12m}, limits: {cpu: 12m}}", 12, 1200, 0),
    ("{limits: {cpu: 3, memory: 1.5Gi}}", 3072, 300000, 3 * GI // 2),  # limits only
    ("{limits: {memory: 100M}}", 2, 0, 100_000_000),
    ("{}", 2, 0, 0),
    ("{requests: {cpu: 300}, limits: {cpu: 300}}", 262144, 30_000_000, 0),  # max shares
])
def test_cpu_and_memory(resources: str, shares: int, quota: int, memory: int) -> None:
    cri = translate(pod(containers_yaml(resources)), NodeSpec())
    r = cri.containers[0].resources
    assert (r.cpu_shares, r.cpu_quota, r.cpu_period, r.memory_limit) == \
        (shares, quota, 100000, memory)


@pytest.mark.parametrize(("resources", "node_memory", "score"), [
    ("{limits: {cpu: 1, memory: 1Gi}}", 32 * GI, -997),
    ("{}", 32 * GI, 1000),
    # Burstable: 1000 - 1000 * request // capacity
    ("{requests: {memory: 8Gi}}", 32 * GI, 750),
    ("{requests: {memory: 1Gi}}", 3 * GI, 667),  # 1000 - 333
    ("{requests: {memory: 31.9Gi}}", 32 * GI, 4),  # 1000 - 996
    ("{requests: {memory: 32Gi}, limits: {memory: 64Gi}}", 32 * GI, 3),  # clamp: at least 3
    ("{requests: {memory: 1Mi}}", 32 * GI, 999),  # clamp: at most 999
    ("{requests: {cpu: 1}}", 32 * GI, 999),  # no memory request
])
def test_oom_score_adj(resources: str, node_memory: int, score: int) -> None:
    cri = translate(pod(containers_yaml(resources)), NodeSpec(memory_bytes=node_memory))
    assert cri.containers[0].resources.oom_score_adj == score


def test_sidecar_oom_score_is_never_above_the_regular_containers() -> None:
    p = pod(containers_yaml("{requests: {memory: 16Gi}}",
                            init=("{requests: {memory: 1Gi}}",)).replace(
        "name: i0\n    image: busybox", "name: i0\n    image: busybox\n    restartPolicy: Always"))
    cri = translate(p, NodeSpec(memory_bytes=32 * GI))
    sidecar, regular = cri.containers
    assert regular.resources.oom_score_adj == 500
    assert sidecar.resources.oom_score_adj == 500  # its own would be 1000 - 31 = 969


def test_node_critical_pod_gets_the_guaranteed_score() -> None:
    text = containers_yaml("{}").replace(
        "spec:\n", "spec:\n  priority: 2000001000\n  priorityClassName: system-node-critical\n")
    cri = translate(pod(text), NodeSpec())
    assert cri.qos_class == "BestEffort"
    assert cri.containers[0].resources.oom_score_adj == -997


def test_hugepages_every_node_size_then_requested() -> None:
    cri = translate(pod(containers_yaml(
        "{requests: {hugepages-2Mi: 8Mi}, limits: {hugepages-2Mi: 8Mi, memory: 1Gi}}")),
        NodeSpec())
    assert cri.containers[0].resources.hugepage_limits == (("2MB", 8 * MI), ("1GB", 0))


def test_pod_totals_with_init_and_sidecars() -> None:
    # regular 500m + sidecar 100m = 600m; init steps: 250m (before the sidecar) -> pod 600m.
    # A large init container (2 CPUs) wins: max(600m, 2000m + sidecars before it).
    text = containers_yaml("{requests: {cpu: 500m}, limits: {cpu: 1}}",
                           init=("{requests: {cpu: 100m}}", "{requests: {cpu: 2}}"))
    text = text.replace("name: i0\n    image: busybox",
                        "name: i0\n    image: busybox\n    restartPolicy: Always")
    cri = translate(pod(text), NodeSpec())
    # 2000m + 100m (sidecar i0 started before i1) = 2100m -> 2150 shares
    assert cri.resources.cpu_shares == 2150
    assert cri.resources.cpu_quota == 100000  # only the regular container has a limit
    assert [c.name for c in cri.containers] == ["i0", "i1", "c0"]
    assert [c.kind.value for c in cri.containers] == ["sidecar", "init", "container"]


def test_swap_by_cgroup_version() -> None:
    p = pod(containers_yaml("{limits: {memory: 1Gi}}"))
    v1 = translate(p, NodeSpec(cgroup_version=1)).containers[0].resources
    v2 = translate(p, NodeSpec(cgroup_version=2)).containers[0].resources
    assert (v1.memory_swap_limit, v1.unified) == (GI, ())
    assert (v2.memory_swap_limit, v2.unified) == (0, (("memory.swap.max", "0"),))
