"""CPU normalization of the pod cgroup alike its containers', and the choice of where it takes
effect (rules ``cpu_normalization_via``, docs/koordinator.md#cpunormalization-and-resize): through
NRI (the runtime records the scaled quota; kubelet reports it) or beside the runtime on the
node, as koordlet writes it (kubelet reports the spec)."""

from __future__ import annotations

import pytest

from policy_server.exceptions import RulesError
from policy_server.policies.koordinator_qos.hooks import normalization
from policy_server.policies.koordinator_qos.qos_node_plan import plan_node
from policy_server.policies.koordinator_qos.target import Stage
from policy_server.sdk import CgroupWrite
from tests.policy_server.factory import container, container_target, pod, rules, synchronize_event

PARENT = "/kubepods/burstable/podUID"
ON = {"cpu_normalization_ratio": 1.2, "features": {"CPUNormalization": True}}


def _quota_writes(baselines: dict[str, int], qos: str | None = None,
                  **doc: object) -> list[CgroupWrite]:
    event = synchronize_event("test", [pod(cgroup_parent=PARENT, qos=qos)],
                              [container(cid=cid, name=cid) for cid in baselines])
    node_plan = plan_node(event, rules(**{**ON, **doc}), [], baselines)
    return [w for w in node_plan.cgroup_writes if w.file == "cpu.cfs_quota_us"]


def test_the_pod_cgroup_is_scaled_as_its_containers_are() -> None:
    # Two containers, 500m and 200m: the pod's limit is 70000, scaled 58334 (it stayed at
    # kubelet's value while each container's was scaled).
    (write,) = _quota_writes({"a": 50_000, "b": 20_000})
    assert write == CgroupWrite(PARENT, "cpu.cfs_quota_us", 58_334, "default/pod-1")


@pytest.mark.parametrize(("baselines", "doc", "qos"), [
    ({"a": 50_000, "b": 0}, {}, None),  # a container without a limit: the pod has none
    ({"a": 50_000}, {"cpu_normalization_ratio": 1.0}, None),
    ({"a": 50_000}, {"features": {"CPUNormalization": False}}, None),
    ({"a": 50_000}, {}, "BE"),
])
def test_no_pod_write_when_nothing_is_scaled(baselines: dict[str, int], doc: dict[str, object],
                                             qos: str | None) -> None:
    assert _quota_writes(baselines, qos, **doc) == []


def test_a_container_not_known_leaves_the_pod_alone() -> None:
    event = synchronize_event("test", [pod(cgroup_parent=PARENT)],
                              [container(cid="a"), container(cid="b", name="b")])
    node_plan = plan_node(event, rules(**ON), [], {"a": 50_000})
    assert not [w for w in node_plan.cgroup_writes if w.file == "cpu.cfs_quota_us"]


@pytest.mark.parametrize("stage", [Stage.CREATE_CONTAINER, Stage.UPDATE_CONTAINER,
                                   Stage.RECONCILE])
def test_via_node_nothing_goes_through_nri(stage: Stage) -> None:
    target = container_target(quota=70_000, cgroup_parent=PARENT)
    via_nri = normalization.container(target, stage, rules(**ON))
    assert via_nri is not None and via_nri.resources.cpu_quota == 58_334
    assert normalization.container(
        target, stage, rules(**ON, cpu_normalization_via="node")) is None


def test_via_node_still_writes_the_pod_cgroup() -> None:
    (write,) = _quota_writes({"a": 70_000}, cpu_normalization_via="node")
    assert write.value == 58_334


def test_an_unknown_way_is_refused_naming_the_key() -> None:
    with pytest.raises(RulesError) as err:
        rules(**ON, cpu_normalization_via="koordlet")
    assert "cpu_normalization_via" in str(err.value) and "nri or node" in str(err.value)
    assert rules(**ON).cpu_normalization_via == "nri"
