"""GroupIdentity (docs/koordinator.md#groupidentity): bvt per class, kube-QoS fallback, LS override,
kernel support."""

from __future__ import annotations

from typing import Any

import pytest

from policy_server.policies.koordinator_qos.annotations import AnnotationError
from policy_server.policies.koordinator_qos.hooks import group_identity
from policy_server.policies.koordinator_qos.target import Stage
from policy_server.sdk.effects import CgroupWrite
from policy_server.sdk.node_facts import NodeFacts
from tests.policy_server.factory import (
    ANOLIS_V2,
    STOCK_V2,
    TRUST_ALL,
    container_target,
    pod_target,
    rules,
)

G, B, BE = "/kubepods/pod1", "/kubepods/burstable/pod1", "/kubepods/besteffort/pod1"
CPUQOS = "koordinator.sh/cpuQOS"


def classes(lsr: bool, ls: bool, be: bool, **extra: Any) -> dict[str, Any]:
    def c(enable: bool) -> dict[str, Any]:
        return {"cpuQOS": {"enable": enable}}

    strategy = {"lsrClass": c(lsr), "lsClass": c(ls), "beClass": c(be), **extra}
    return {"node_slo": {"resourceQOSStrategy": strategy}}


ALL = classes(True, True, True)
# (case, qos, parent, annotations, rules doc, expected bvt)
CASES: list[tuple[str, str | None, str, dict[str, Any], dict[str, Any], int]] = [
    ("LSE uses LSR", "LSE", G, {}, ALL, 2),
    ("LSR", "LSR", G, {}, ALL, 2),
    ("LS", "LS", B, {}, ALL, 2),
    ("BE", "BE", BE, {}, ALL, -1),
    ("defaults: every class disabled -> 0", "BE", BE, {}, {}, 0),
    ("disabled class -> 0", "LS", B, {}, classes(True, False, True), 0),
    ("coreSched policy -> 0", "LSR", G,
     {}, classes(True, True, True, policies={"cpuPolicy": "coreSched"}), 0),
    ("custom value", "LS", B, {},
     {"node_slo": {"resourceQOSStrategy": {"lsClass": {"cpuQOS": {"enable": True,
                                                                  "groupIdentity": 1}}}}}, 1),
    ("unlabeled guaranteed -> LSR if enabled", None, G, {}, ALL, 2),
    ("unlabeled guaranteed -> LS if only LS", None, G,
     {}, {"node_slo": {"resourceQOSStrategy": {"lsClass": {"cpuQOS": {"enable": True,
                                                                     "groupIdentity": 1}}}}}, 1),
    ("unlabeled guaranteed, none enabled", None, G, {}, classes(False, False, True), 0),
    ("unlabeled burstable -> LS", None, B, {}, ALL, 2),
    ("unlabeled besteffort -> BE", None, BE, {}, ALL, -1),
    ("SYSTEM falls back on kube QoS", "SYSTEM", BE, {}, ALL, -1),
    ("LS override value with enable", "LS", B, {CPUQOS: {"enable": True, "groupIdentity": -1}},
     ALL, -1),
    ("LS override without enable -> 0", "LS", B, {CPUQOS: {"groupIdentity": 1}}, ALL, 0),
    ("LS override enable false -> 0", "LS", B, {CPUQOS: {"enable": False}}, ALL, 0),
    ("LS override enable only keeps class value", "LS", B, {CPUQOS: {"enable": True}}, ALL, 2),
    ("LS override works with the rule off", "LS", B,
     {CPUQOS: {"enable": True, "groupIdentity": 1}}, {}, 1),
    ("override ignored for LSR", "LSR", G, {CPUQOS: {"enable": False}}, ALL, 2),
]


@pytest.mark.parametrize(
    ("qos", "parent", "annotations", "doc", "expected"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_bvt_value(
    qos: str | None, parent: str, annotations: dict[str, Any], doc: dict[str, Any], expected: int
) -> None:
    # koordinator's semantics: the cpuQOS override trusted (docs/koordinator.md#trust).
    target = pod_target(qos=qos, cgroup_parent=parent, annotations=annotations)
    assert group_identity.bvt_value(target, rules(trust=TRUST_ALL, **doc)) == expected


@pytest.mark.parametrize("raw", ['{"groupIdentity": 3, "enable": true}', '{"enable": "yes"}',
                                 "not json"])
def test_bad_override_is_a_hook_error(raw: str) -> None:
    target = pod_target(qos="LS", cgroup_parent=B, annotations={CPUQOS: raw})
    with pytest.raises(AnnotationError, match=CPUQOS):
        group_identity.pod(target, rules(**ALL))


def test_kernel_support_writes_pod_cgroup_and_container_unified() -> None:
    r = rules(**ALL, group_identity_kernel_support=True)
    pod = group_identity.pod(pod_target(qos="BE", cgroup_parent=BE), r)
    assert pod is not None
    assert pod.effects == (CgroupWrite(BE, "cpu.bvt_warp_ns", -1, "default/pod-1"),)
    ctr = group_identity.container(container_target(qos="BE", cgroup_parent=BE, node=ANOLIS_V2),
                                   Stage.CREATE_CONTAINER, r)
    assert ctr is not None and dict(ctr.resources.unified) == {"cpu.bvt_warp_ns": "-1"}


def test_without_declared_support_only_the_pod_cgroup_is_written() -> None:
    # The executor writes the pod cgroup when the kernel has the file; containers get no
    # unified key (runc refuses it on cgroup v1).
    r = rules(**ALL)
    pod = group_identity.pod(pod_target(qos="LSR", cgroup_parent=G), r)
    assert pod is not None
    assert pod.effects == (CgroupWrite(G, "cpu.bvt_warp_ns", 2, "default/pod-1"),)
    assert not pod.warnings
    assert group_identity.container(container_target(qos="LSR"), Stage.CREATE_CONTAINER, r) is None
    assert group_identity.container(container_target(qos="LSR"), Stage.RECONCILE, r) is None


def test_rule_off_and_value_zero_does_nothing_at_creation() -> None:
    r = rules(group_identity_kernel_support=True)
    assert group_identity.pod(pod_target(qos="LSR"), r) is None
    target = container_target(qos="LSR", node=ANOLIS_V2)
    assert group_identity.container(target, Stage.CREATE_CONTAINER, r) is None
    # ...but reconcile states the value so a previously written bvt gets reset to 0.
    ctr = group_identity.container(target, Stage.RECONCILE, r)
    assert ctr is not None and dict(ctr.resources.unified) == {"cpu.bvt_warp_ns": "0"}


V1, V2 = NodeFacts(cgroup_version=1), NodeFacts(cgroup_version=2)


@pytest.mark.parametrize("stage", [Stage.CREATE_CONTAINER, Stage.RECONCILE])
def test_cgroup_v1_containers_never_get_unified_whatever_the_rules_say(stage: Stage) -> None:
    # runc refuses any unified key on cgroup v1: the container would not start.
    r = rules(**ALL, group_identity_kernel_support=True)
    for qos, parent, value in (("LSR", G, 2), ("BE", BE, -1)):
        target = container_target(qos=qos, cgroup_parent=parent, node=V1)
        assert group_identity.container(target, stage, r) is None
        # The pod cgroup's v1 cpu.bvt_warp_ns (Anolis kernels) still carries the value.
        pod = group_identity.pod(pod_target(qos=qos, cgroup_parent=parent), r)
        assert pod is not None
        assert pod.effects == (CgroupWrite(parent, "cpu.bvt_warp_ns", value, "default/pod-1"),)
    assert not group_identity.container_mapping(r, V1)


@pytest.mark.parametrize("stage", [Stage.CREATE_CONTAINER, Stage.RECONCILE])
def test_cgroup_v2_containers_with_the_bvt_file_follow_the_rules(stage: Stage) -> None:
    target = container_target(qos="BE", cgroup_parent=BE, node=ANOLIS_V2)
    ctr = group_identity.container(target, stage, rules(**ALL, group_identity_kernel_support=True))
    assert ctr is not None and dict(ctr.resources.unified) == {"cpu.bvt_warp_ns": "-1"}
    assert group_identity.container(target, stage, rules(**ALL)) is None


@pytest.mark.parametrize(
    "node", [STOCK_V2, V2, NodeFacts()],
    ids=["stock cgroup v2 kernel", "cgroup v2, files not probed", "nothing known"])
@pytest.mark.parametrize("stage", [Stage.CREATE_CONTAINER, Stage.RECONCILE])
def test_containers_without_a_known_bvt_file_never_get_the_key(
    node: NodeFacts, stage: Stage
) -> None:
    # runc opens <container cgroup>/cpu.bvt_warp_ns: a missing file stops the container, so the
    # declaration alone (group_identity_kernel_support) is not enough.
    r = rules(**ALL, group_identity_kernel_support=True)
    target = container_target(qos="BE", cgroup_parent=BE, node=node)
    assert group_identity.container(target, stage, r) is None
    assert not group_identity.container_mapping(r, node)
    pod = group_identity.pod(pod_target(qos="BE", cgroup_parent=BE), r)
    assert pod is not None  # the pod cgroup still gets it where the kernel has the file
    assert pod.effects == (CgroupWrite(BE, "cpu.bvt_warp_ns", -1, "default/pod-1"),)
