"""The koordinator-qos policy end to end through the engine: hook order, gates,
docs/koordinator.md#decisions-on-koordlets-quirks quirks."""

from __future__ import annotations

from typing import Any

from bridge.contract.catalogue import EventName as E
from policy_server.engine.evaluate import Engine
from policy_server.policies.koordinator_qos import build_policy
from policy_server.policies.koordinator_qos.bundle import HOOKS
from policy_server.policies.koordinator_qos.rules import Rules
from policy_server.sdk.effects import CgroupWrite, of_type
from policy_server.sdk.registry import Registry
from tests.policy_server.factory import (
    TRUST_ALL,
    batch_spec,
    container,
    envelope,
    evaluate_json,
    pod,
    reply_of,
    rules,
    topology,
)

RS = "scheduling.koordinator.sh/resource-status"
BE_PARENT = "/kubepods/besteffort/pod1"
BATCH = {
    "requests": {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "1Gi"},
    "limits": {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "1Gi"},
}


def engine(r: Rules | None = None) -> Engine:
    registry = Registry()
    current = r or rules()
    registry.add(build_policy(lambda: current))
    return Engine(registry)


def reply(r: Rules, event: str, **payload: Any) -> dict[str, Any]:
    return reply_of(evaluate_json(engine(r), "koordinator-qos", envelope(event, **payload)))


def test_hook_order_is_koordlet_byte_order() -> None:
    names = [h.name for h in HOOKS]
    assert names == ["BatchResource", "CPUNormalization", "CPUSetAllocator", "GroupIdentity",
                     "OOMScoreAdj", "Resctrl", "gpu env inject"]
    policy = build_policy(Rules)
    assert [h.name for h in policy.handlers_for(E.RUN_POD_SANDBOX)] == [
        "BatchResource", "CPUSetAllocator", "GroupIdentity", "Resctrl"]
    assert [h.name for h in policy.handlers_for(E.UPDATE_CONTAINER)] == [
        "BatchResource", "CPUNormalization", "CPUSetAllocator"]
    assert [h.name for h in policy.handlers_for(E.SYNCHRONIZE)] == ["Reconcile"]
    assert [h.name for h in policy.handlers_for(E.REMOVE_POD_SANDBOX)] == ["Resctrl"]
    assert policy.events == {E.SYNCHRONIZE, E.RUN_POD_SANDBOX, E.REMOVE_POD_SANDBOX,
                             E.CREATE_CONTAINER, E.UPDATE_CONTAINER, E.REMOVE_CONTAINER}


def test_create_container_for_a_pinned_lsr_pod() -> None:
    # Guaranteed, two whole CPUs: kubelet's decision backs a two-CPU exclusive cpuset.
    p = pod(qos="LSR", annotations={RS: {"cpuset": "2-3"}})
    c = container(cpu={"shares": 2048, "quota": 200000, "period": 100000})
    out = reply(rules(), "CreateContainer", pod=p, container=c)
    assert out == {"adjust": {"linux": {"resources": {"cpu": {"quota": -1, "cpus": "2-3"}}}}}


def test_create_container_for_a_be_pod_with_batch_resources() -> None:
    p = pod(qos="BE", cgroup_parent=BE_PARENT, annotations=batch_spec({"app": BATCH}))
    out = reply(rules(topology=topology()), "CreateContainer", pod=p, container=container())
    # Shares/quota/limit from the batch formulas; the BE "clear cpuset" is not sent.
    assert out == {"adjust": {"linux": {"resources": {
        "cpu": {"shares": 512, "quota": 50000}, "memory": {"limit": 1024**3}}}}}


def test_be_pod_with_cpuset_ends_with_quota_minus_one_and_a_conflict() -> None:
    # docs/koordinator.md#decisions-on-koordlets-quirks: CPUSetAllocator runs after BatchResource,
    # so its quota -1 wins; we report it.
    p = pod(qos="BE", cgroup_parent=BE_PARENT,
            annotations={**batch_spec({"app": BATCH}), RS: {"cpuset": "5"}})
    # koordlet's quirk needs a cpuset on a BestEffort pod, which kubelet never backs: trusted.
    out = reply(rules(trust=TRUST_ALL), "CreateContainer", pod=p, container=container())
    cpu = out["adjust"]["linux"]["resources"]["cpu"]
    assert cpu == {"shares": 512, "quota": -1, "cpus": "5"}
    assert out["warnings"] == [
        "conflict on adjust.linux.resources.cpu.quota: BatchResource set 50000, "
        "CPUSetAllocator set -1; CPUSetAllocator wins (later in order)"
    ]


def test_update_container_names_the_container_and_uses_the_requested_quota() -> None:
    r = rules(features={"CPUNormalization": True}, cpu_normalization_ratio=1.2)
    c = container(cid="abc", cpu={"quota": 50000})  # current
    out = reply(r, "UpdateContainer", pod=pod(qos="LS"), container=c,
                linux_resources={"cpu": {"quota": 200000, "shares": 2048}})
    # koordlet would scale the current 50000 and leave container_id empty.
    assert out == {"update": [{"container_id": "abc",
                               "linux": {"resources": {"cpu": {"quota": 166667}}}}]}


def test_feature_gates_default_off_hooks_do_nothing() -> None:
    annotations = {
        "scheduling.koordinator.sh/device-allocated": {"gpu": [{"minor": 0}]},
        "koordinator.sh/oom-score-adj": "100",
        "node.koordinator.sh/resctrl": {},
    }
    p = pod(qos="LS", annotations=annotations)
    c = container(cpu={"quota": 100000})
    assert reply(rules(cpu_normalization_ratio=2), "CreateContainer", pod=p, container=c) == {}
    on = rules(cpu_normalization_ratio=2, trust=TRUST_ALL, features={
        "GPUEnvInject": True, "OOMScoreAdj": True, "Resctrl": True, "CPUNormalization": True})
    adjust = reply(on, "CreateContainer", pod=p, container=c)["adjust"]
    assert adjust == {
        "env": [{"key": "NVIDIA_VISIBLE_DEVICES", "value": "0"}],
        "linux": {"resources": {"cpu": {"quota": 50000}, "rdt_class": "koordlet-uid-1"},
                  "oom_score_adj": 100},
    }


def test_switching_a_default_on_gate_off() -> None:
    p = pod(qos="LSR", annotations={RS: {"cpuset": "2-3"}})
    off = rules(features={"CPUSetAllocator": False})
    assert reply(off, "CreateContainer", pod=p, container=container()) == {}


def test_hook_error_is_a_warning_under_ignore_and_a_rejection_under_fail() -> None:
    p = pod(qos="LSR", annotations={RS: "{broken"})
    warned = reply(rules(), "CreateContainer", pod=p, container=container())
    assert "adjust" not in warned
    assert warned["warnings"][0].startswith("CPUSetAllocator: annotation " + RS)
    failed = reply(rules(failure_policy="Fail"), "CreateContainer", pod=p, container=container())
    assert failed["reject"]["reason"].startswith("CPUSetAllocator: annotation " + RS)


def test_hami_partial_output_survives_under_ignore() -> None:
    p = pod(qos="LS", labels={"koordinator.sh/gpu-isolation-provider": "HAMi-core"},
            annotations={"scheduling.koordinator.sh/device-allocated": {"gpu": [{"minor": 1}]}})
    out = reply(rules(features={"GPUEnvInject": True}), "CreateContainer", pod=p,
                container=container(env=["NVIDIA_VISIBLE_DEVICES=1"]))
    assert out["adjust"] == {"env": [{"key": "NVIDIA_VISIBLE_DEVICES", "value": "1"}]}
    assert "gpu-memory-ratio" in out["warnings"][0]


def test_run_pod_sandbox_returns_effects_not_reply_fields() -> None:
    p = pod(qos="LSR", annotations={RS: {"cpuset": "2"}})
    evaluation = evaluate_json(engine(), "koordinator-qos", envelope("RunPodSandbox", pod=p))
    assert reply_of(evaluation) == {}
    writes = of_type(evaluation.decision.effects, CgroupWrite)
    assert len(writes) == len(evaluation.decision.effects)  # nothing but cgroup writes
    assert [(e.file, e.value) for e in writes] == [("cpu.cfs_quota_us", -1)]


def test_events_without_handlers_answer_no_change() -> None:
    out = reply(rules(), "StartContainer", pod=pod(), container=container())
    assert out == {}
