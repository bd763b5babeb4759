"""Node effects of koordinator-qos on real containerd (1.7.24 and 2.1.9), issue 9.

The policy server runs with its defaults for node effects (``--pod-cgroup-writes on``, the
host's ``/sys/fs/cgroup``), a one-second reconciler and a fake resctrl tree (this VM has no RDT
hardware). The assertions read the kernel's cgroup v1 files of the **pod** cgroup, which NRI
cannot reach: only the policy server's own writes put these values there.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.waiting import wait_until

from .cgroup_scope import CGROUP_PREFIX
from .conftest import Stack, StackFactory, outcome_of
from .cri import CriClient
from .inspect_proc import CGROUP_V1_ROOT, cgroup_values
from .test_policies import (
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
    quota,
)

pytestmark = pytest.mark.e2e

RECONCILE_INTERVAL_S = 1
# Generous: a loaded 2-core CI machine; the reconciler itself runs every second.
RESTORE_TIMEOUT_S = 20.0
RESCTRL = "node.koordinator.sh/resctrl"
NODE_WEBHOOK = {
    "name": "koordinator-qos",
    # RunPodSandbox/RemovePodSandbox: the pod-level writes and the resctrl group lifecycle.
    "events": ["RunPodSandbox", "CreateContainer", "UpdateContainer", "RemovePodSandbox",
               "Synchronize"],
    "timeout": "1s",
    "failure_policy": "Fail",
}  # fmt: skip


# The policy server writes only beneath kubelet's kubepods hierarchy (docs/security.md): here
# kubelet's --cgroup-root is this run's prefix, so pods go to /<prefix>/kubepods/pod<uid>.
PODS = f"{CGROUP_PREFIX}/kubepods"


def pod_file(controller: str, uid: str, name: str, level: str = "") -> Path:
    """A pod cgroup's file; ``level``: the kube-QoS level the pod sits in (``besteffort``)."""
    prefix = f"{PODS}/{level}" if level else PODS
    return CGROUP_V1_ROOT / controller / prefix / f"pod{uid}" / name


def read_int(path: Path) -> int:
    return int(path.read_text().strip())


def policy_log(stack: Stack) -> Callable[[], str]:
    return lambda: f"--- policy server:\n{stack.policy.tail()}"


@pytest.fixture
def kubelet_pod_cgroup() -> Iterator[str]:
    """A pod uid whose cpu cgroup exists with a CFS quota before the sandbox runs, as kubelet
    creates pod cgroups (so quota -1 afterwards can only be the policy server's write)."""
    uid = str(uuid.uuid4())
    directory = pod_file("cpu", uid, "")
    directory.mkdir(parents=True)
    (directory / "cpu.cfs_quota_us").write_text("50000\n")
    yield uid
    for controller in ("cpu", "cpuacct", "cpuset", "memory", "pids", "blkio", "devices"):
        with contextlib.suppress(OSError):
            pod_file(controller, uid, "").rmdir()  # runc leaves the pod level behind


def node_stack(start_stack: StackFactory, tmp: Path, **rules: object) -> Stack:
    resctrl = tmp / "resctrl"
    (resctrl / "info" / "L3").mkdir(parents=True)
    (resctrl / "info" / "L3" / "cbm_mask").write_text("7ff\n")
    (resctrl / "schemata").write_text("L3:0=7ff\n")
    return start_stack(
        webhooks=[NODE_WEBHOOK],
        rules={**koordinator_rules(), **rules},
        policy_args=("--reconcile-interval", str(RECONCILE_INTERVAL_S),
                     "--resctrl-root", str(resctrl),
                     "--kubelet-cgroup-root", f"/{CGROUP_PREFIX}"),
    )


def test_lsr_pod_cgroup_is_unthrottled_and_drift_is_restored(
    clean_pods: CriClient, start_stack: StackFactory, kubelet_pod_cgroup: str, tmp_path: Path,
) -> None:
    stack = node_stack(start_stack, tmp_path)
    uid = kubelet_pod_cgroup
    assert read_int(pod_file("cpu", uid, "cpu.cfs_quota_us")) == 50000
    pod = clean_pods.run_pod(
        "lsr-node", labels={QOS_LABEL: "LSR"},
        annotations={RESOURCE_STATUS: json.dumps({"cpuset": "1"})}, uid=uid,
        cgroup_prefix=PODS)  # fmt: skip
    container_id = clean_pods.run_container(
        pod, resources={"cpu_quota": 100000, "cpu_period": 100000})  # fmt: skip
    assert outcome_of(stack, "koordinator-qos", "CreateContainer", pod) == "ok"
    pod_quota = pod_file("cpu", uid, "cpu.cfs_quota_us")
    assert read_int(pod_quota) == -1  # written at RunPodSandbox, before the reply
    pid = clean_pods.container_pid(container_id)
    assert cgroup_values(pid).cpuset_cpus == "1" and quota(pid) == -1

    # Someone resets both levels behind our back; the reconciler puts them back: the pod level
    # by writing the file, the container through the bridge's /v1/updates and NRI.
    container_quota = CGROUP_V1_ROOT / "cpu" / cgroup_values(pid).cpu_path.lstrip("/")
    pod_quota.write_text("50000\n")
    (container_quota / "cpu.cfs_quota_us").write_text("40000\n")
    logs = policy_log(stack)
    wait_until(lambda: read_int(pod_quota) == -1,
               what="pod quota -1 again", timeout_s=RESTORE_TIMEOUT_S,
               interval_s=0.1, details=logs)
    wait_until(lambda: quota(pid) == -1,
               what="container quota -1 again", timeout_s=RESTORE_TIMEOUT_S,
               interval_s=0.1, details=logs)
    assert clean_pods.container_pid(container_id) == pid  # not restarted
    metrics = stack.policy.get_text("/metrics")
    assert 'policy_reconcile_drift_fixed_total{level="pod"}' in metrics
    assert 'policy_reconcile_drift_fixed_total{level="container"}' in metrics
    state = stack.policy.get("/v1/state")["node_effects"]
    assert state["cgroups"]["writable"] is True and state["reconciler"]["running"] is True


def test_be_pod_cgroup_gets_the_batch_values(
    clean_pods: CriClient, start_stack: StackFactory, tmp_path: Path
) -> None:
    stack = node_stack(start_stack, tmp_path)
    spec = {"containers": {
        "app": {"requests": {BATCH_CPU: "300", BATCH_MEMORY: "128Mi"},
                "limits": {BATCH_CPU: "600", BATCH_MEMORY: "128Mi"}},
        "sidecar": {"requests": {BATCH_CPU: "200", BATCH_MEMORY: "64Mi"},
                    "limits": {BATCH_CPU: "400", BATCH_MEMORY: "64Mi"}},
    }}  # fmt: skip
    # A koordinator BE pod is kube-BestEffort (its cpu/memory moved to batch resources).
    pod = clean_pods.run_pod(
        "be-node", labels={QOS_LABEL: "BE"}, annotations={EXTENDED_RESOURCE_SPEC: json.dumps(spec)},
        cgroup_prefix=f"{PODS}/besteffort")
    container_id = clean_pods.run_container(pod, name="app")
    assert outcome_of(stack, "koordinator-qos", "CreateContainer", pod) == "ok"
    # Pod formulas: sums over the annotation's containers.
    def be(controller: str, name: str) -> int:
        return read_int(pod_file(controller, pod.uid, name, "besteffort"))

    assert be("cpu", "cpu.shares") == milli_cpu_to_shares(500) == 512
    assert be("cpu", "cpu.cfs_quota_us") == milli_cpu_to_quota(1000) == 100000
    assert be("memory", "memory.limit_in_bytes") == memory_limit(192 * MIB) == 201326592
    values = cgroup_values(clean_pods.container_pid(container_id))
    assert values.cpu_shares == milli_cpu_to_shares(300) == 307


def test_removed_pod_leaves_no_resctrl_group(
    clean_pods: CriClient, start_stack: StackFactory, tmp_path: Path
) -> None:
    """Fake resctrl tree: the group is made at RunPodSandbox and removed at RemovePodSandbox;
    a group left by a pod removed while the server was down is collected by the reconciler.
    (No container is started: runc would look for the real /sys/fs/resctrl.)"""
    features = {"GPUEnvInject": True, "Resctrl": True}
    stack = node_stack(start_stack, tmp_path, features=features)
    resctrl = tmp_path / "resctrl"
    stale = resctrl / "koordlet-removed-while-down"
    stale.mkdir()
    annotation = json.dumps({"llc": {"schemata": {"range": [0, 30]}}})
    pod = clean_pods.run_pod("resctrl", annotations={RESCTRL: annotation}, cgroup_prefix=PODS)
    group = resctrl / f"koordlet-{pod.uid}"
    logs = policy_log(stack)
    wait_until(group.is_dir, what="the pod's resctrl group", timeout_s=RESTORE_TIMEOUT_S,
               interval_s=0.1, details=logs)
    assert "L3:0=f" in (group / "schemata").read_text()  # 30% of 11 ways: ways 0-3
    wait_until(lambda: not stale.exists(),
               what="the stale group collected", timeout_s=RESTORE_TIMEOUT_S,
               interval_s=0.1, details=logs)
    clean_pods.stop_pod(pod.id)
    clean_pods.remove_pod(pod.id)
    wait_until(lambda: not any(p.name.startswith("koordlet-") for p in resctrl.iterdir()),
               what="no resctrl group left", timeout_s=RESTORE_TIMEOUT_S, interval_s=0.1,
               details=logs)


def test_oom_score_is_kept_current(
    clean_pods: CriClient, start_stack: StackFactory, tmp_path: Path
) -> None:
    """NRI sets the score at creation only; the reconciler keeps running processes at it."""
    stack = node_stack(start_stack, tmp_path, features={"GPUEnvInject": True, "OOMScoreAdj": True})
    pod = clean_pods.run_pod("oom", annotations={"koordinator.sh/oom-score-adj": "500"},
                             cgroup_prefix=PODS)
    container_id = clean_pods.run_container(pod)
    assert outcome_of(stack, "koordinator-qos", "CreateContainer", pod) == "ok"
    score = Path(f"/proc/{clean_pods.container_pid(container_id)}/oom_score_adj")
    # containerd 2.x applies the NRI value at creation; 1.7.24 speaks NRI v0.6.1, whose
    # adjustment has no oom_score_adj (new in v0.7.0): there the reconciler's first pass sets it.
    wait_until(lambda: read_int(score) == 500,
               what="oom_score_adj 500", timeout_s=RESTORE_TIMEOUT_S,
               interval_s=0.1, details=policy_log(stack))
    score.write_text("0\n")  # behind our back
    wait_until(lambda: read_int(score) == 500,
               what="oom_score_adj 500 again", timeout_s=RESTORE_TIMEOUT_S,
               interval_s=0.1, details=policy_log(stack))
