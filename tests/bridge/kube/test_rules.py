"""kubelet's rules, value by value, against numbers worked out by hand from the rules in
docs/try.md (not from the code under test)."""

from __future__ import annotations

import textwrap

import pytest

from bridge.kube import NodeSpec, container, parse_documents, pod_sandbox, pods_of, translate
from bridge.kube.pod_spec import PodSpec
from bridge.kube.resources import QosClass, pod_qos_class
from bridge.runtime_facts.profiles import PROFILES

GI = 1 << 30
MI = 1 << 20


def pod(text: str) -> PodSpec:
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
    # Zero requests are skipped: a limit without a (positive) request is not Guaranteed.
    (("{requests: {cpu: 0}, limits: {cpu: 1, memory: 1Gi}}",), (), QosClass.BURSTABLE),
    (("{requests: {cpu: 0, memory: 0}, limits: {cpu: 1, memory: 1Gi}}",), (),
     QosClass.BURSTABLE),
    (("{requests: {cpu: 0, memory: 0}}",), (), QosClass.BEST_EFFORT),
    (("{requests: {cpu: 0}, limits: {cpu: 0, memory: 1Gi}}",), (), QosClass.BURSTABLE),
])
def test_qos_class(resources: tuple[str, ...], init: tuple[str, ...],
                   expected: QosClass) -> None:
    assert pod_qos_class(pod(containers_yaml(*resources, init=init))) is expected


UID = "11111111-2222-3333-4444-555555555555"


@pytest.mark.parametrize(("resources", "driver", "parent"), [
    ("{limits: {cpu: 1, memory: 1Gi}}", "cgroupfs", f"/kubepods/pod{UID}"),
    ("{requests: {cpu: 1}}", "cgroupfs", f"/kubepods/burstable/pod{UID}"),
    ("{}", "cgroupfs", f"/kubepods/besteffort/pod{UID}"),
    # systemd: the full name, every level a slice (issue 25: not just the last element).
    ("{limits: {cpu: 1, memory: 1Gi}}", "systemd",
     "/kubepods.slice/kubepods-pod11111111_2222_3333_4444_555555555555.slice"),
    ("{requests: {cpu: 1}}", "systemd",
     "/kubepods.slice/kubepods-burstable.slice/"
     "kubepods-burstable-pod11111111_2222_3333_4444_555555555555.slice"),
    ("{}", "systemd", "/kubepods.slice/kubepods-besteffort.slice/"
     "kubepods-besteffort-pod11111111_2222_3333_4444_555555555555.slice"),
])
@pytest.mark.parametrize("version", [1, 2])
def test_cgroup_parent(resources: str, driver: str, parent: str, version: int) -> None:
    cri = translate(pod(containers_yaml(resources)),
                    NodeSpec(cgroup_driver=driver, cgroup_version=version))
    assert cri.cgroup_parent == parent


@pytest.mark.parametrize("version", [1, 2])
def test_systemd_cgroups_paths_name_the_last_slice(version: int) -> None:
    """containerd passes kubelet's parent to NRI unchanged and names the container's (and the
    sandbox's) cgroup `<last element>:cri-containerd:<id>`."""
    cri = translate(pod(containers_yaml("{requests: {cpu: 1}}")),
                    NodeSpec(cgroup_driver="systemd", cgroup_version=version))
    profile = PROFILES["containerd-2.1.9"]
    sandbox = pod_sandbox(cri, profile)
    ctr = container(cri, cri.containers[0], sandbox, profile)
    leaf = "kubepods-burstable-pod11111111_2222_3333_4444_555555555555.slice"
    assert sandbox.linux.cgroup_parent == f"/kubepods.slice/kubepods-burstable.slice/{leaf}"
    assert sandbox.linux.cgroups_path == f"{leaf}:cri-containerd:{sandbox.id}"
    assert ctr.linux.cgroups_path == f"{leaf}:cri-containerd:{ctr.id}"


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


def test_sidecar_oom_score_is_capped_by_the_smallest_regular_request() -> None:
    """kubelet's minRegularContainerMemory: the sidecar's score is capped at the score of the
    regular container with the smallest memory request (issue 25: 875, not 750)."""
    p = pod(containers_yaml("{requests: {memory: 2Gi}}", "{requests: {memory: 4Gi}}",
                            init=("{requests: {memory: 1Gi}}",)).replace(
        "name: i0\n    image: busybox", "name: i0\n    image: busybox\n    restartPolicy: Always"))
    cri = translate(p, NodeSpec(memory_bytes=16 * GI))
    assert [c.resources.oom_score_adj for c in cri.containers] == [875, 875, 750]


def test_sidecar_oom_score_kept_when_a_regular_container_requests_no_memory() -> None:
    # The smallest regular request is 0: kubelet leaves the sidecar's own score.
    p = pod(containers_yaml("{requests: {memory: 2Gi}}", "{requests: {cpu: 1}}",
                            init=("{requests: {memory: 1Gi}}",)).replace(
        "name: i0\n    image: busybox", "name: i0\n    image: busybox\n    restartPolicy: Always"))
    cri = translate(p, NodeSpec(memory_bytes=16 * GI))
    assert [c.resources.oom_score_adj for c in cri.containers] == [938, 875, 999]


@pytest.mark.parametrize(("priority_class", "priority", "qos", "score"), [
    # The Priority admission fills in the system classes' values when spec.priority is absent.
    ("system-node-critical", 2000001000, "BestEffort", -997),
    ("system-cluster-critical", 2000000000, "BestEffort", 1000),  # critical, not node-critical
    ("high-priority", 0, "BestEffort", 1000),  # a cluster's own class: unknown here
])
def test_system_priority_classes_without_priority(priority_class: str, priority: int, qos: str,
                                                  score: int) -> None:
    text = containers_yaml("{}").replace(
        "spec:\n", f"spec:\n  priorityClassName: {priority_class}\n")
    p = pod(text)
    cri = translate(p, NodeSpec())
    assert (p.priority, cri.qos_class, cri.containers[0].resources.oom_score_adj) == \
        (priority, qos, score)


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


POD_LEVEL = """
kind: Pod
metadata: {name: pod-resources-demo, uid: 11111111-2222-3333-4444-555555555555}
spec:
  resources:
    requests: {cpu: 1, memory: 100Mi}
    limits: {cpu: 1, memory: 200Mi}
  containers:
  - name: ctr-1
    image: nginx
    resources:
      requests: {cpu: 500m, memory: 50Mi}
      limits: {cpu: 500m, memory: 100Mi}
  - name: ctr-2
    image: fedora
"""


def test_pod_level_resources_burstable() -> None:
    """`spec.resources` decides the class and the sandbox's values; a container without its
    own limit takes the pod's; the pod's unassigned memory request (100Mi - 50Mi) is shared
    over the two containers (25Mi each) for the OOM score."""
    cri = translate(pod(POD_LEVEL), NodeSpec(memory_bytes=GI))
    assert cri.qos_class == "Burstable"
    assert cri.cgroup_parent == f"/kubepods/burstable/pod{UID}"
    r = cri.resources
    assert (r.cpu_shares, r.cpu_quota, r.memory_limit) == (1024, 100000, 200 * MI)
    one, two = (c.resources for c in cri.containers)
    assert (one.cpu_shares, one.cpu_quota, one.memory_limit) == (512, 50000, 100 * MI)
    # no CPU request: shares from the (pod-level) limit
    assert (two.cpu_shares, two.cpu_quota, two.memory_limit) == (1024, 100000, 200 * MI)
    # 1000 - 1000 * (50Mi + 25Mi) // 1Gi = 1000 - 73; 1000 - 1000 * 25Mi // 1Gi = 1000 - 24
    assert (one.oom_score_adj, two.oom_score_adj) == (927, 976)


def test_pod_level_limits_alone_make_a_guaranteed_pod() -> None:
    # The API server defaults pod-level requests to the pod-level limits; the containers have
    # no resources of their own (before issue 25: BestEffort, 1000).
    text = ("kind: Pod\nmetadata: {name: p, uid: " + UID + "}\nspec:\n"
            "  resources: {limits: {cpu: 2, memory: 1Gi}}\n"
            "  containers: [{name: c, image: busybox}]\n")
    cri = translate(pod(text), NodeSpec(cgroup_version=1))
    assert (cri.qos_class, cri.cgroup_parent) == ("Guaranteed", f"/kubepods/pod{UID}")
    r = cri.containers[0].resources
    assert (r.cpu_shares, r.cpu_quota, r.memory_limit, r.memory_swap_limit, r.oom_score_adj) \
        == (2048, 200000, GI, GI, -997)
    assert (cri.resources.cpu_shares, cri.resources.memory_limit) == (2048, GI)


def test_pod_level_requests_alone_are_burstable() -> None:
    text = ("kind: Pod\nmetadata: {name: p, uid: " + UID + "}\nspec:\n"
            "  resources: {requests: {memory: 8Gi}}\n"
            "  containers: [{name: c, image: busybox, resources: {limits: {cpu: 1}}}]\n")
    cri = translate(pod(text), NodeSpec(memory_bytes=32 * GI))
    # Only the pod level counts for the class: the container's CPU limit does not make it
    # Guaranteed-like; a memory request without a limit is Burstable.
    assert cri.qos_class == "Burstable"
    # The whole 8Gi is unassigned, shared over one container: 1000 - 1000 * 8Gi // 32Gi.
    assert cri.containers[0].resources.oom_score_adj == 750
    # The container's own CPU limit stays; it has no memory limit, nor has the pod.
    r = cri.containers[0].resources
    assert (r.cpu_shares, r.cpu_quota, r.memory_limit) == (1024, 100000, 0)
