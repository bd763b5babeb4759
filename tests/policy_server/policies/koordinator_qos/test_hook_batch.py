"""BatchResource (docs/koordinator.md#batchresource): BE container and pod formulas, cfsQuota
suppress, ratio."""

from __future__ import annotations

from typing import Any

import pytest

from policy_server.policies.koordinator_qos.hooks import batch
from policy_server.policies.koordinator_qos.target import Stage
from policy_server.sdk.effects import CgroupWrite
from policy_server.sdk.resource_patch import ResourcePatch
from tests.policy_server.factory import batch_spec, container_target, pod_target, rules

GI = 1024**3
BE_PARENT = "/kubepods/besteffort/pod1"
SUPPRESS_BY_QUOTA = {
    "node_slo": {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressPolicy": "cfsQuota"}}
}
FULL = {
    "requests": {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "2Gi"},
    "limits": {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "2Gi"},
}

# (case, container spec, rules doc, expected shares, quota, memory limit)
CONTAINER_CASES: list[tuple[str, dict[str, Any], dict[str, Any], int, int, int]] = [
    ("batch 500 / 2Gi", FULL, {}, 512, 50000, 2 * GI),
    ("no requests gives shares 2", {"limits": FULL["limits"]}, {}, 2, 50000, 2 * GI),
    ("no limits: quota and memory unlimited", {"requests": FULL["requests"]}, {}, 512, -1, -1),
    ("2k milli-cores", {"requests": {"kubernetes.io/batch-cpu": "2k"},
                        "limits": {"kubernetes.io/batch-cpu": "2k"}}, {}, 2048, 200000, -1),
    ("cfsQuota suppress disables quota", FULL, SUPPRESS_BY_QUOTA, 512, -1, 2 * GI),
    ("ratio 1.2 scales quota", FULL, {"cpu_normalization_ratio": 1.2}, 512, 41667, 2 * GI),
    ("ratio <= 1 is ignored", FULL, {"cpu_normalization_ratio": 0.9}, 512, 50000, 2 * GI),
    ("suppress wins over ratio", FULL, {**SUPPRESS_BY_QUOTA, "cpu_normalization_ratio": 1.2},
     512, -1, 2 * GI),
    ("empty spec", {}, {}, 2, -1, -1),
]


@pytest.mark.parametrize(
    ("spec", "doc", "shares", "quota", "limit"),
    [c[1:] for c in CONTAINER_CASES],
    ids=[c[0] for c in CONTAINER_CASES],
)
def test_container_formulas(
    spec: dict[str, Any], doc: dict[str, Any], shares: int, quota: int, limit: int
) -> None:
    target = container_target(qos="BE", cgroup_parent=BE_PARENT,
                              annotations=batch_spec({"app": spec}))
    result = batch.container(target, Stage.CREATE_CONTAINER, rules(**doc))
    assert result is not None
    assert result.resources == ResourcePatch(cpu_shares=shares, cpu_quota=quota,
                                             memory_limit=limit)


@pytest.mark.parametrize(
    ("qos", "annotations"),
    [
        ("LS", batch_spec({"app": FULL})),  # only BE pods
        (None, batch_spec({"app": FULL})),
        ("BE", {}),  # no annotation
        ("BE", {"node.koordinator.sh/extended-resource-spec": {"other": 1}}),  # no containers map
        ("BE", batch_spec({"sidecar": FULL})),  # no entry for this container
    ],
)
def test_nothing_changes(qos: str, annotations: dict[str, Any]) -> None:
    target = container_target(qos=qos, annotations=annotations)
    assert batch.container(target, Stage.UPDATE_CONTAINER, rules()) is None


def test_unparsable_annotation_is_a_warning_not_an_error() -> None:
    target = container_target(
        qos="BE", annotations={"node.koordinator.sh/extended-resource-spec": "{oops"}
    )
    result = batch.container(target, Stage.CREATE_CONTAINER, rules())
    assert result is not None and result.resources.is_empty() and not result.errors
    assert "extended-resource-spec" in result.warnings[0]


def _pod_writes(containers: dict[str, Any], **doc: Any) -> dict[str, int]:
    target = pod_target(qos="BE", cgroup_parent=BE_PARENT, annotations=batch_spec(containers))
    result = batch.pod(target, rules(**doc))
    assert result is not None
    assert all(isinstance(e, CgroupWrite) and e.cgroup_parent == BE_PARENT for e in result.effects)
    return {e.file: e.value for e in result.effects if isinstance(e, CgroupWrite)}


def test_pod_sums() -> None:
    two = {"a": FULL, "b": FULL}
    assert _pod_writes(two) == {
        "cpu.shares": 1024, "cpu.cfs_quota_us": 100000, "memory.limit_in_bytes": 4 * GI,
    }
    assert _pod_writes(two, cpu_normalization_ratio=1.2)["cpu.cfs_quota_us"] == 83334


def test_pod_any_container_without_limit_makes_pod_unlimited() -> None:
    writes = _pod_writes({"a": FULL, "b": {"requests": FULL["requests"]}})
    assert writes == {"cpu.shares": 1024, "cpu.cfs_quota_us": -1, "memory.limit_in_bytes": -1}


def test_pod_quota_disabled_by_suppress_policy() -> None:
    assert _pod_writes({"a": FULL}, **SUPPRESS_BY_QUOTA)["cpu.cfs_quota_us"] == -1


def test_pod_hook_skips_non_be_pods() -> None:
    target = pod_target(qos="LS", annotations=batch_spec({"a": FULL}))
    assert batch.pod(target, rules()) is None
