"""CPUSetAllocator (docs/koordinator.md#cpusetallocator): the eight-step cpuset decision, quota -1,
pod-level write."""

from __future__ import annotations

from typing import Any

import pytest

from policy_server.policies.koordinator_qos.annotations import AnnotationError, resource_status
from policy_server.policies.koordinator_qos.hooks import cpuset
from policy_server.policies.koordinator_qos.target import Stage
from policy_server.sdk.effects import CgroupWrite
from tests.policy_server.factory import (
    BE_POOLS_2_NUMA,
    TRUST_ALL,
    TRUST_LABEL,
    container_target,
    pod_target,
    rules,
    topology,
)

RS = "scheduling.koordinator.sh/resource-status"
BESTEFFORT = "/kubepods/besteffort/pod1"
BURSTABLE = "/kubepods/burstable/pod1"
GUARANTEED = "/kubepods/pod1"
NUMA1 = {"numaNodeResources": [{"node": 1, "resources": {"cpu": "2"}}]}
NUMA_BOTH = {"numaNodeResources": [{"node": 1, "resources": {"cpu": "2"}},
                                   {"node": 0, "resources": {"cpu": "2"}}]}
NUMA_BATCH = {"numaNodeResources": [{"node": 0, "resources": {"kubernetes.io/batch-cpu": "1000"}}]}
NUMA_ZERO = {"numaNodeResources": [{"node": 1, "resources": {"cpu": "0"}}]}
STATIC = {"kubelet.koordinator.sh/cpu-manager-policy": {"policy": "static"}}
SYSTEM = {"node.koordinator.sh/system-qos-resource": {"cpuset": "0-1"}}
BE_POOLS = {"node.koordinator.sh/be-cpu-shared-pools": BE_POOLS_2_NUMA}

# (case, qos label, cgroup parent, resource-status, topology (None = no rule), features, expected)
# Pool joins are canonical ("0-15" where koordlet's Test_cpusetRule_getContainerCPUSet expects the
# joined string "0-7,8-15"): the kernel stores the same set either way.
CASES: list[tuple[str, str | None, str, Any, Any, dict[str, bool], str | None]] = [
    ("1 pinned cpuset verbatim, even without any rule", "LSR", GUARANTEED,
     {"cpuset": "2-3"}, None, {}, "2-3"),
    ("1 pinned beats everything else", "BE", BESTEFFORT, {"cpuset": "4"}, topology(), {}, "4"),
    ("2 no rule received: nothing", "LS", BURSTABLE, None, None, {}, None),
    ("3 NUMA-aware LS joins LS pools of listed nodes", "LS", BURSTABLE, NUMA1, topology(), {},
     "8-15"),
    ("3 both listed nodes", "LSR", GUARANTEED, NUMA_BOTH, topology(), {}, "0-15"),
    ("3 positive batch-cpu counts as NUMA-aware", None, GUARANTEED, NUMA_BATCH, topology(), {},
     "0-7"),
    ("3 zero cpu is not NUMA-aware", "LS", BURSTABLE, NUMA_ZERO, topology(), {}, "0-15"),
    ("3 BE with BECPUManager joins BE pools", "BE", BESTEFFORT, NUMA1, topology(**BE_POOLS),
     {"BECPUManager": True}, "10-15"),
    ("3 BE with the gate off falls through to BestEffort", "BE", BESTEFFORT, NUMA1,
     topology(**BE_POOLS), {}, ""),
    ("4 SYSTEM with a system cpuset", "SYSTEM", BURSTABLE, None, topology(**SYSTEM), {}, "0-1"),
    ("4 SYSTEM without one: all LS pools (step 8)", "SYSTEM", BURSTABLE, None, topology(), {},
     "0-15"),
    ("5 LS: all LS pools", "LS", BURSTABLE, None, topology(), {}, "0-15"),
    ("5 LS even under the static policy", "LS", GUARANTEED, None, topology(**STATIC), {},
     "0-15"),
    ("6 kube BestEffort: clear", None, BESTEFFORT, None, topology(), {}, ""),
    # koordlet clears by kube QoS only: a BE-labelled Burstable pod is confined to the pools...
    ("6 BE label on a Burstable pod: shared pools", "BE", BURSTABLE, None, topology(), {},
     "0-15"),
    # ...or left to kubelet under the static policy.
    ("7 BE label on a Burstable pod, static policy", "BE", BURSTABLE, None,
     topology(**STATIC), {}, None),
    ("7 static policy leaves kubelet's choice", None, GUARANTEED, None, topology(**STATIC), {},
     None),
    ("7 LSR without cpuset under static", "LSR", GUARANTEED, None, topology(**STATIC), {}, None),
    ("8 unlabeled guaranteed, policy none", None, GUARANTEED, None, topology(), {}, "0-15"),
    ("8 unlabeled burstable", None, BURSTABLE, None, topology(), {}, "0-15"),
    ("8 LSR waiting for its cpuset", "LSR", GUARANTEED, {"cpuset": ""}, topology(), {},
     "0-15"),
    ("8 rule received without pools", None, BURSTABLE, None, {}, {}, ""),
]


@pytest.mark.parametrize(
    ("qos", "parent", "status", "topo", "features", "expected"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_decide_cpuset(
    qos: str | None, parent: str, status: Any, topo: Any, features: dict[str, bool],
    expected: str | None,
) -> None:
    annotations = {RS: status} if status is not None else {}
    # The label as koord-manager set it (trusted): koordinator's classification.
    target = pod_target(TRUST_LABEL, qos=qos, cgroup_parent=parent, annotations=annotations)
    r = rules(topology=topo, features=features)
    assert cpuset.decide_cpuset(target, resource_status(target.pod.annotations), r) == expected


def test_pinned_container_gets_cpus_and_unlimited_quota() -> None:
    target = container_target(qos="LSR", annotations={RS: {"cpuset": "2-3"}})
    result = cpuset.container(target, Stage.CREATE_CONTAINER, rules(trust=TRUST_ALL))
    assert result is not None
    assert (result.resources.cpu_cpus, result.resources.cpu_quota) == ("2-3", -1)


def test_disable_unset_cpu_quota_keeps_quota() -> None:
    target = container_target(qos="LSR", annotations={RS: {"cpuset": "2-3"}})
    result = cpuset.container(target, Stage.UPDATE_CONTAINER, rules(disable_unset_cpu_quota=True,
                                                                         trust=TRUST_ALL))
    assert result is not None
    assert (result.resources.cpu_cpus, result.resources.cpu_quota) == ("2-3", None)


def test_share_pool_container_keeps_its_quota() -> None:
    result = cpuset.container(container_target(qos="LS"), Stage.CREATE_CONTAINER,
                              rules(topology=topology()))
    assert result is not None
    assert (result.resources.cpu_cpus, result.resources.cpu_quota) == ("0-15", None)


def test_empty_cpuset_is_not_emitted() -> None:
    # koordlet's "clear" is a no-op in NRI (empty cpus means unset): nothing to send.
    target = container_target(qos="BE", cgroup_parent=BESTEFFORT)
    assert cpuset.container(target, Stage.CREATE_CONTAINER, rules(topology=topology())) is None


def test_pod_quota_write_for_pinned_pod() -> None:
    target = pod_target(qos="LSE", cgroup_parent=GUARANTEED, annotations={RS: {"cpuset": "2"}})
    result = cpuset.pod(target, rules())
    assert result is not None
    assert result.effects == (CgroupWrite(GUARANTEED, "cpu.cfs_quota_us", -1, "default/pod-1"),)
    assert cpuset.pod(target, rules(disable_unset_cpu_quota=True)) is None
    assert cpuset.pod(pod_target(qos="LS"), rules(topology=topology())) is None


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("{not json", "not valid JSON"),
        ('["cpuset"]', "expected a JSON object"),
        ('{"cpuset": 3}', "cpuset: expected a string"),
        ('{"cpuset": "0-x"}', "invalid cpu list"),
        ('{"numaNodeResources": {"node": 1}}', "numaNodeResources: expected a list"),
        ('{"numaNodeResources": [{"node": "1"}]}', "node: expected an integer"),
        ('{"numaNodeResources": [{"node": 1, "resources": {"cpu": "lots"}}]}',
         "expected a quantity"),
    ],
)
def test_bad_resource_status_is_a_hook_error(raw: str, fragment: str) -> None:
    target = container_target(qos="LSR", annotations={RS: raw})
    with pytest.raises(AnnotationError, match=fragment) as info:
        cpuset.container(target, Stage.CREATE_CONTAINER, rules(topology=topology()))
    assert RS in str(info.value)
