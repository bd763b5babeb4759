"""Existing containers (docs/koordinator.md#existing-containers-the-reconciler): Synchronize returns
updates for what the rules change."""

from __future__ import annotations

import json
from typing import Any

from policy_server.engine.evaluate import Engine
from policy_server.policies.koordinator_qos import build_policy
from policy_server.policies.koordinator_qos.baselines import QuotaBaselines
from policy_server.policies.koordinator_qos.reconcile import diff
from policy_server.policies.koordinator_qos.rules import Rules
from policy_server.sdk.effects import CgroupWrite, of_type
from policy_server.sdk.model import CPU, Memory, Resources
from policy_server.sdk.node_facts import UNKNOWN_NODE, NodeFacts
from policy_server.sdk.registry import Registry
from policy_server.sdk.resource_patch import ResourcePatch
from tests.policy_server.factory import (
    ANOLIS_V2,
    STOCK_V2,
    batch_spec,
    container,
    envelope,
    evaluate_json,
    pod,
    reply_of,
    request,
    rules,
    topology,
)

RS = "scheduling.koordinator.sh/resource-status"
BATCH = {"requests": {"kubernetes.io/batch-cpu": "500"},
         "limits": {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "1Gi"}}


class Holder:
    """A mutable rules holder so one engine can see a rule change."""

    def __init__(self, r: Rules, node: NodeFacts = UNKNOWN_NODE) -> None:
        self.rules = r
        self.baselines = QuotaBaselines()
        registry = Registry()
        registry.add(build_policy(lambda: self.rules, self.baselines, node))
        self.engine = Engine(registry, node)

    def send(self, event: str, **payload: Any) -> dict[str, Any]:
        return reply_of(evaluate_json(self.engine, "koordinator-qos", envelope(event, **payload)))


def test_synchronize_updates_only_containers_that_differ() -> None:
    pods = [
        pod(pod_id="p1", uid="u1", qos="LSR", annotations={RS: {"cpuset": "2-3"}}),
        pod(pod_id="p2", uid="u2", qos="BE", cgroup_parent="/kubepods/besteffort/p2",
            annotations=batch_spec({"app": BATCH})),
        pod(pod_id="p3", uid="u3", qos="LS"),
    ]
    containers = [
        container(cid="c1", pod_id="p1", cpu={"cpus": "0-15", "quota": 200000}),
        # already right: shares 512, quota 50000, memory 1Gi
        container(cid="c2", pod_id="p2", cpu={"shares": 512, "quota": 50000},
                  memory_limit=1024**3),
        container(cid="c3", pod_id="p3", cpu={"cpus": "0,1,2,3,4,5,6,7,8-15"}),
        container(cid="c4", pod_id="p1", state="CONTAINER_STOPPED"),
        container(cid="c5", pod_id="gone"),
    ]
    out = Holder(rules(topology=topology())).send("Synchronize", pods=pods,
                                                  containers=containers)
    assert out["update"] == [
        {"container_id": "c1", "linux": {"resources": {"cpu": {"quota": -1, "cpus": "2-3"}}}}
    ]
    assert out["warnings"] == ["Reconcile: container's pod is not in the pod list; skipped"]


def test_rule_change_is_seen_by_the_next_synchronize() -> None:
    h = Holder(rules(topology=topology()))
    p = [pod(pod_id="p1", qos="LS")]
    c = [container(cid="c1", pod_id="p1", cpu={"cpus": "0-7,8-15"})]
    assert h.send("Synchronize", pods=p, containers=c) == {}
    h.rules = rules(topology={"node.koordinator.sh/cpu-shared-pools": [{"cpuset": "0-3"}]})
    assert h.send("Synchronize", pods=p, containers=c)["update"] == [
        {"container_id": "c1", "linux": {"resources": {"cpu": {"cpus": "0-3"}}}}
    ]


def test_normalization_recomputes_from_the_quota_seen_at_creation() -> None:
    h = Holder(rules(features={"CPUNormalization": True}, cpu_normalization_ratio=1.2))
    p = pod(pod_id="p1", qos="LS")
    created = h.send("CreateContainer", pod=p,
                     container=container(cid="c1", pod_id="p1", cpu={"quota": 100000}))
    assert created["adjust"]["linux"]["resources"]["cpu"]["quota"] == 83334
    running = [container(cid="c1", pod_id="p1", cpu={"quota": 83334})]
    # Same rules: nothing to do (no double scaling).
    assert h.send("Synchronize", pods=[p], containers=running) == {}
    h.rules = rules(features={"CPUNormalization": True}, cpu_normalization_ratio=2.0)
    assert h.send("Synchronize", pods=[p], containers=running)["update"] == [
        {"container_id": "c1", "linux": {"resources": {"cpu": {"quota": 50000}}}}
    ]
    h.rules = rules(features={"CPUNormalization": True})  # ratio removed: restore
    assert h.send("Synchronize", pods=[p], containers=running)["update"][0]["linux"] == {
        "resources": {"cpu": {"quota": 100000}}}


def test_normalization_without_a_base_warns_once_for_many_containers() -> None:
    h = Holder(rules(features={"CPUNormalization": True}, cpu_normalization_ratio=1.2))
    p = pod(pod_id="p1", qos="LS")
    cs = [container(cid=f"c{i}", pod_id="p1", cpu={"quota": 100000}) for i in range(3)]
    out = h.send("Synchronize", pods=[p], containers=cs)
    assert "update" not in out
    assert len(out["warnings"]) == 1 and out["warnings"][0].endswith("(x3)")


def test_baselines_follow_update_remove_and_synchronize() -> None:
    h = Holder(rules())
    p = pod(pod_id="p1")
    h.send("CreateContainer", pod=p, container=container(cid="a", cpu={"quota": 100000}))
    h.send("CreateContainer", pod=p, container=container(cid="b"))
    h.send("UpdateContainer", pod=p, container=container(cid="a"),
           linux_resources={"cpu": {"quota": 300000}})
    assert dict(h.baselines.view()) == {"a": 300000, "b": 0}
    h.send("RemoveContainer", pod=p, container=container(cid="b"))
    assert dict(h.baselines.view()) == {"a": 300000}
    h.send("Synchronize", pods=[p], containers=[])
    assert dict(h.baselines.view()) == {}


def test_baselines_are_bounded() -> None:
    store = QuotaBaselines(max_containers=2)
    for cid in ("a", "b", "c"):
        store.observe(request(envelope("CreateContainer", pod=pod(),
                                           container=container(cid=cid, cpu={"quota": 1000}))))
    assert list(store.view()) == ["b", "c"]


def test_group_identity_reset_on_reconcile_when_rule_turned_off() -> None:
    h = Holder(rules(group_identity_kernel_support=True), ANOLIS_V2)
    p = [pod(pod_id="p1", qos="LSR")]
    stale = [container(cid="c1", pod_id="p1", unified={"cpu.bvt_warp_ns": "2"})]
    fresh = [container(cid="c2", pod_id="p1")]
    assert h.send("Synchronize", pods=p, containers=stale)["update"] == [
        {"container_id": "c1", "linux": {"resources": {"unified": {"cpu.bvt_warp_ns": "0"}}}}
    ]
    assert h.send("Synchronize", pods=p, containers=fresh) == {}


GI_ALL = {"node_slo": {"resourceQOSStrategy": {
    c: {"cpuQOS": {"enable": True}} for c in ("lsrClass", "lsClass", "beClass")}}}


def test_cgroup_v1_reconcile_and_creation_carry_no_unified_key() -> None:
    # The rules declare kernel support; on cgroup v1 runc would refuse the update (and the
    # container at creation), so the bvt value goes only to the pod cgroup.
    r = rules(**GI_ALL, group_identity_kernel_support=True)
    p = [pod(pod_id="p1", qos="BE", cgroup_parent="/kubepods/besteffort/p1")]
    c = [container(cid="c1", pod_id="p1")]
    v1 = Holder(r, NodeFacts(cgroup_version=1))
    synced = evaluate_json(v1.engine, "koordinator-qos", envelope("Synchronize", pods=p,
                                                                 containers=c))
    assert "update" not in reply_of(synced), reply_of(synced)
    writes = of_type(synced.decision.effects, CgroupWrite)
    assert len(writes) == len(synced.decision.effects)  # nothing but cgroup writes
    assert [(e.file, e.value) for e in writes] == [("cpu.bvt_warp_ns", -1)]
    created = v1.send("CreateContainer", pod=p[0], container=c[0])
    assert "unified" not in json.dumps(created), created
    # cgroup v2 on a stock kernel: no cpu.bvt_warp_ns in the containers' cgroups, no key either.
    stock = Holder(r, STOCK_V2)
    assert "update" not in stock.send("Synchronize", pods=p, containers=c)
    assert "unified" not in json.dumps(stock.send("CreateContainer", pod=p[0], container=c[0]))
    # The same rules on cgroup v2 with the file in the containers' cgroups: the mapping is there.
    v2 = Holder(r, ANOLIS_V2)
    assert v2.send("Synchronize", pods=p, containers=c)["update"] == [
        {"container_id": "c1", "linux": {"resources": {"unified": {"cpu.bvt_warp_ns": "-1"}}}}
    ]
    created = v2.send("CreateContainer", pod=p[0], container=c[0])
    assert created["adjust"]["linux"]["resources"]["unified"] == {"cpu.bvt_warp_ns": "-1"}


def test_diff_treats_unset_zero_and_negative_as_unlimited() -> None:
    current = Resources(cpu=CPU(shares=512, quota=0, cpus="0-3"), memory=Memory(limit=None))
    desired = ResourcePatch(cpu_shares=512, cpu_quota=-1, cpu_cpus="0,1,2,3", memory_limit=-1)
    assert diff(current, desired).is_empty()
    changed = diff(current, ResourcePatch(cpu_shares=2, memory_limit=10, cpu_cpus="0-1"))
    assert changed == ResourcePatch(cpu_shares=2, memory_limit=10, cpu_cpus="0-1")
    assert diff(None, ResourcePatch(cpu_cpus="")).is_empty()
