"""koordinator-qos node effects on a cgroup v2 + systemd node (containerd 2.1.9, runc 1.3).

The pods' slices are made as kubelet makes them with the systemd driver (properties set by
systemd before RunPodSandbox); the policy server writes the pod-level values itself and its
reconciler keeps them and the containers' values in place. Every assertion reads the cgroup
v2 files of the pod slice or the container scope in this guest.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import Stack, StackFactory, outcome_of
from tests.e2e.containerd import Containerd
from tests.e2e.cri import CriClient
from tests.e2e.test_node_effects import NODE_WEBHOOK, policy_log, read_int
from tests.e2e.test_policies import (
    BATCH_CPU,
    BATCH_MEMORY,
    EXTENDED_RESOURCE_SPEC,
    MIB,
    QOS_LABEL,
    RESOURCE_STATUS,
    koordinator_rules,
    memory_limit,
    milli_cpu_to_quota,
    milli_cpu_to_shares,
)

from . import guest_node
from .guest_node import cgroup_dir, read

pytestmark = pytest.mark.node_v2
NODE_V2_WEIGHT = 25  # run-guest.sh's split: seconds in a guest / 10

REPO = Path(__file__).resolve().parents[2]
PRODUCTION_RULES = REPO / "deploy" / "kubernetes" / "overlays" / "production" / "rules.yaml"
# NODE_WEBHOOK's 1 s timeout becomes 10 s here: the harness scales it for emulation.
WEBHOOK = NODE_WEBHOOK
RECONCILE_INTERVAL_S = 2


def start_node_stack(
    start_stack: StackFactory, tmp: Path, rules: dict[str, object], fake_resctrl: bool = True
) -> Stack:
    """The policy server with a short reconciler interval; a fake resctrl tree unless the
    test starts containers of resctrl-enabled pods (runc would look for the real one, which
    this guest, like most VMs, does not have)."""
    args = ["--reconcile-interval", str(RECONCILE_INTERVAL_S)]
    if fake_resctrl:
        resctrl = tmp / "resctrl"
        (resctrl / "info" / "L3").mkdir(parents=True)
        (resctrl / "info" / "L3" / "cbm_mask").write_text("7ff\n")
        (resctrl / "schemata").write_text("L3:0=7ff\n")
        args += ["--resctrl-root", str(resctrl)]
    return start_stack(webhooks=[WEBHOOK], rules=rules, policy_args=tuple(args))


def test_probe_reports_cgroup_v2_pod_writes(start_stack: StackFactory, tmp_path: Path) -> None:
    stack = start_node_stack(start_stack, tmp_path, koordinator_rules())
    effects = stack.policy.get("/v1/state")["node_effects"]
    assert effects["cgroups"]["writable"] is True, effects
    assert effects["reconciler"]["running"] is True, effects
    text = json.dumps(effects)
    assert '"version": 2' in text or '"cgroup_version": 2' in text, effects


def test_lsr_pod_is_pinned_unthrottled_and_drift_is_repaired(
    clean_pods: CriClient, start_stack: StackFactory, tmp_path: Path
) -> None:
    stack = start_node_stack(start_stack, tmp_path, koordinator_rules())
    # kubelet's slice for the pod carries a quota (0.5 CPU) before the sandbox runs.
    pod = guest_node.run_pod(
        clean_pods, "lsr", "guaranteed", cpu_quota_per_sec_us=500_000,
        labels={QOS_LABEL: "LSR"}, annotations={RESOURCE_STATUS: json.dumps({"cpuset": "1"})})
    container_id = clean_pods.run_container(
        pod.pod, resources={"cpu_quota": 100000, "cpu_period": 100000})  # fmt: skip
    assert outcome_of(stack, "koordinator-qos", "CreateContainer", pod.pod) == "ok"
    assert read(pod.directory, "cpu.max").split()[0] == "max"
    pid = clean_pods.container_pid(container_id)
    scope = cgroup_dir(pid)
    assert read(scope, "cpuset.cpus") == "1"
    assert read(scope, "cpu.max").split()[0] == "max"

    # Drift written by hand into the slice and the scope: the reconciler repairs both, the
    # slice by its own write, the container through the bridge and NRI.
    (pod.directory / "cpu.max").write_text("50000 100000\n")
    (scope / "cpu.max").write_text("40000 100000\n")
    guest_node.wait_value(pod.directory, "cpu.max", "max 100000", timeout_s=30)
    guest_node.wait_value(scope, "cpu.max", "max 100000", timeout_s=30)
    assert clean_pods.container_pid(container_id) == pid  # repaired in place, not restarted
    metrics = stack.policy.get_text("/metrics")
    assert 'policy_reconcile_drift_fixed_total{level="pod"}' in metrics
    assert 'policy_reconcile_drift_fixed_total{level="container"}' in metrics


def test_be_pod_slice_gets_the_batch_values(
    containerd: Containerd, clean_pods: CriClient, start_stack: StackFactory, tmp_path: Path
) -> None:
    # BE's schedIdle (koordlet's core-sched rule: cpuPolicy coreSched, beClass schedIdle 1):
    # cpu.idle on the BestEffort kube-QoS slice, written by the reconciler.
    base = koordinator_rules()
    rules = {**base, "features": {**base["features"], "CoreSched": True},
             "node_slo": {"resourceQOSStrategy": {
                 "policies": {"cpuPolicy": "coreSched"},
                 "beClass": {"cpuQOS": {"enable": True, "schedIdle": 1}}}}}  # fmt: skip
    stack = start_node_stack(start_stack, tmp_path, rules)
    spec = {"containers": {
        "app": {"requests": {BATCH_CPU: "300", BATCH_MEMORY: "128Mi"},
                "limits": {BATCH_CPU: "600", BATCH_MEMORY: "128Mi"}},
        "sidecar": {"requests": {BATCH_CPU: "200", BATCH_MEMORY: "64Mi"},
                    "limits": {BATCH_CPU: "400", BATCH_MEMORY: "64Mi"}},
    }}  # fmt: skip
    pod = guest_node.run_pod(clean_pods, "be", "besteffort", labels={QOS_LABEL: "BE"},
                             annotations={EXTENDED_RESOURCE_SPEC: json.dumps(spec)})
    container_id = clean_pods.run_container(pod.pod, name="app")
    assert outcome_of(stack, "koordinator-qos", "CreateContainer", pod.pod) == "ok"
    runc = containerd.runtime.runc
    # Pod formulas: sums over the annotation's containers, in the node runtime's conversion.
    pod_weight = guest_node.runc_weight(runc, milli_cpu_to_shares(500))
    guest_node.wait_value(pod.directory, "cpu.weight", str(pod_weight))
    assert read(pod.directory, "cpu.max") == f"{milli_cpu_to_quota(1000)} 100000"
    assert read_int(pod.directory / "memory.max") == memory_limit(192 * MIB) == 201326592
    scope = cgroup_dir(clean_pods.container_pid(container_id))
    assert read(scope, "cpu.weight") == str(guest_node.runc_weight(runc, milli_cpu_to_shares(300)))
    assert read(scope, "cpu.max") == f"{milli_cpu_to_quota(600)} 100000"
    assert read_int(scope / "memory.max") == 128 * MIB
    # BestEffort's kube-QoS slice: cpu.idle 1 (BE's schedIdle); the guest's 6.12 has the file.
    qos_slice = guest_node.slice_dir("kubepods-besteffort.slice")
    guest_node.wait_value(qos_slice, "cpu.idle", "1", timeout_s=30)
    logs = policy_log(stack)()
    assert "Traceback" not in logs, logs


def test_oom_score_of_running_processes_is_kept(
    clean_pods: CriClient, start_stack: StackFactory, tmp_path: Path
) -> None:
    rules = {**koordinator_rules(), "features": {"GPUEnvInject": True, "OOMScoreAdj": True}}
    stack = start_node_stack(start_stack, tmp_path, rules)
    # Burstable: kubelet's floor there is 3 (its own value when the request carries one); in a
    # BestEffort pod 500 would be below kubelet's 1000 and refused (a policy never makes a
    # container stronger than kubelet made it).
    pod = guest_node.run_pod(clean_pods, "oom", "burstable", annotations={
        "koordinator.sh/oom-score-adj": "500"})  # fmt: skip
    container_id = clean_pods.run_container(pod.pod)
    assert outcome_of(stack, "koordinator-qos", "CreateContainer", pod.pod) == "ok"
    score = Path(f"/proc/{clean_pods.container_pid(container_id)}/oom_score_adj")
    assert read_int(score) == 500  # containerd 2.x applies the NRI value at creation
    score.write_text("0\n")
    guest_node.wait_value(score.parent, "oom_score_adj", "500", timeout_s=30)


def test_production_rules_start_workloads_on_a_stock_kernel(
    clean_pods: CriClient, start_stack: StackFactory, tmp_path: Path
) -> None:
    """Issue 24 finding 1: group_identity_kernel_support: true on a kernel without
    cpu.bvt_warp_ns must not put the key in any container's unified map (runc refuses it and
    the container never starts)."""
    assert not (guest_node.CGROUP_ROOT / "kubepods.slice" / "cpu.bvt_warp_ns").exists()
    rules = yaml.safe_load(PRODUCTION_RULES.read_text())
    rules["topology"] = koordinator_rules()["topology"]
    stack = start_node_stack(start_stack, tmp_path, rules, fake_resctrl=False)
    # The LS container gets the LS pool's cpuset; a BE pod without batch resources gets no
    # container change at all. Neither gets a unified key, so both start.
    for qos_class, qos, outcome in (("LS", "burstable", "ok"), ("BE", "besteffort", "no_change")):
        pod = guest_node.run_pod(clean_pods, qos_class.lower(), qos,
                                 labels={QOS_LABEL: qos_class})  # fmt: skip
        container_id = clean_pods.run_container(pod.pod)
        assert outcome_of(stack, "koordinator-qos", "CreateContainer", pod.pod) == outcome
        pid = clean_pods.container_pid(container_id)
        assert cgroup_dir(pid).parent == pod.directory
