"""The shipped image as the DaemonSet pod of the production overlay, on the cgroup v2 +
systemd node (containerd 2.1.9, runc 1.3, the systemd cgroup driver).

The host's step of `make node-v2` exports what the guest cannot make (tests/node_v2/
shipped_export.py): the image built from this checkout by tests/shipped's build, the rendered
overlay, the CNI plugins. Here the image is imported into containerd's k8s.io namespace under
the reference the manifest names, and the pod is created as kubelet creates it with the
systemd driver: its slice first, then the sandbox with the declared volumes, users, groups,
capabilities, read-only root and seccomp profile, and its own network namespace; the probes
run as declared. Only the NRI directory and containerd's (where its CRI socket is) move (the
private containerd's). Then workload pods
get koordinator-qos's values from it: every assertion reads cgroup v2 files of a pod slice
or a container scope in this guest.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.support import quantity
from tests.e2e.containerd import Containerd
from tests.e2e.cri import BASE_CPU_SHARES, BASE_CPUSET, BASE_MEMORY_BYTES
from tests.shipped.daemonset_pod import (
    DaemonSetPod,
    check_liveness_probes,
    check_registered,
    check_security_context,
    check_update_reaches_a_running_container,
    fake_resctrl,
    restart_containerd_under_the_pod,
    running,
)
from tests.shipped.kubelet import pod_resources, qos_class, shares

from . import guest_node, shipped_export
from .guest_node import SystemdKubeletCri, cgroup_dir, read

# The first test carries the fixture: the image import alone takes minutes under emulation.
pytestmark = [pytest.mark.node_v2, pytest.mark.timeout(3600)]
NODE_V2_WEIGHT = 43  # run-guest.sh's split: seconds in a guest / 10

# The DaemonSet pod is not on the host network: conftest gives containerd a CNI network.
POD_NETWORK = shipped_export.CNI_BIN
RESCTRL = Path("/sys/fs/resctrl")
REPO = Path(__file__).resolve().parents[2]
QOS_LABEL = "koordinator.sh/qosClass"
RESOURCE_STATUS = "scheduling.koordinator.sh/resource-status"
EXTENDED_RESOURCE_SPEC = "node.koordinator.sh/extended-resource-spec"
OOM_SCORE_ADJ = "koordinator.sh/oom-score-adj"
MIB = 1024 * 1024
# The shipped reconcile interval is 10 s (koordlet's); drift waits leave it room to run twice
# under emulation (guest_node.wait_value scales them).
REPAIR_TIMEOUT_S = 30


@pytest.fixture(scope="module")
def daemonset(containerd: Containerd, cri: SystemdKubeletCri) -> Iterator[DaemonSetPod]:
    shipped = shipped_export.load()
    workdir = Path(tempfile.mkdtemp(prefix="kubelet-", dir=containerd.dirs.base))
    host_paths = {"/var/run/nri": containerd.dirs.nri_socket.parent,
                  "/run/containerd": containerd.dirs.address.parent}
    if not RESCTRL.is_dir():
        # The kernel makes /sys/fs/resctrl only where the CPU has RDT; this emulated one may
        # not, and the overlay's hostPath (type: Directory) would keep the pod from starting.
        host_paths[str(RESCTRL)] = fake_resctrl(containerd.dirs.base)
    kubelet = guest_node.SystemdKubelet(cri, workdir, host_paths, runc=containerd.runtime.runc)
    if str(RESCTRL) in host_paths:
        kubelet.notes.append(f"no {RESCTRL} on this node (no RDT): a resctrl-shaped directory")
    notes = REPO / ".e2e" / "node-v2" / "test_daemonset_v2.notes"
    try:
        with running(shipped.overlay, shipped.docs, containerd, cri, kubelet, shipped.image) as ds:
            yield ds
    finally:  # how long the import and the start took, for the docs (pytest shows no output)
        notes.parent.mkdir(parents=True, exist_ok=True)
        notes.write_text("".join(f"{n}\n" for n in kubelet.notes))


def policy_state(ds: DaemonSetPod) -> dict[str, Any]:
    """GET /v1/state of the policy server, from inside its container (its Unix socket)."""
    code, out = ds.cri.exec_sync(
        ds.pod.containers["policy-server"],
        ["curl", "--fail", "--silent", "--show-error", "--max-time", "20", "--unix-socket",
         "/run/nri-webhook-bridge/policy.sock", "http://policy/v1/state"],
        timeout_s=30,
    )  # fmt: skip
    assert code == 0, out
    state: dict[str, Any] = json.loads(out)["node_effects"]
    return state


DIAG_DIR = REPO / ".e2e" / "node-v2"


def diagnose(ds: DaemonSetPod, test: str, directory: Path | None, stage: str) -> str:
    """What the policy server saw, written to .e2e/node-v2/diag-<test>.txt (and returned): its
    state, its log, its own cgroup and mounts, and the pod slice as the host and it see it."""
    lines = [f"stage: {stage}"]
    try:
        lines.append("state: " + json.dumps(policy_state(ds), indent=1, default=str))
    except Exception as exc:  # a diagnostic must not hide the failure it explains
        lines.append(f"state: unreadable: {exc!r}")
    try:
        pid = ds.cri.container_pid(ds.pod.containers["policy-server"])
        proc = Path(f"/proc/{pid}")
        lines.append(f"policy-server pid {pid} cgroup: {(proc / 'cgroup').read_text()!r}")
        lines += [f"  mount: {m}" for m in (proc / "mountinfo").read_text().splitlines()
                  if "cgroup" in m or "/proc" in m]  # fmt: skip
        if directory is not None:
            rel = directory.relative_to("/sys/fs/cgroup")
            seen = proc / "root" / "host" / "sys" / "fs" / "cgroup" / rel
            for name in ("cpu.weight", "cpu.max", "memory.max"):
                host = (directory / name).read_text().strip()
                inside = (seen / name).read_text().strip() if (seen / name).exists() else "absent"
                lines.append(f"{rel}/{name}: host {host!r}, policy server sees {inside!r}")
    except Exception as exc:
        lines.append(f"policy server's view: unreadable: {exc!r}")
    lines.append("--- policy-server log:\n" + ds.log("policy-server")[-20000:])
    lines.append("--- bridge log (tail):\n" + ds.log("bridge")[-8000:])
    text = "\n".join(lines)
    DIAG_DIR.mkdir(parents=True, exist_ok=True)
    (DIAG_DIR / f"diag-{test}.txt").write_text(text)
    return text


def weight(ds: DaemonSetPod, cpu_shares: int) -> str:
    return str(guest_node.runc_weight(ds.containerd.runtime.runc, cpu_shares))


def test_the_pod_runs_in_the_slice_kubelet_made(daemonset: DaemonSetPod) -> None:
    spec = daemonset.spec
    unit = guest_node.pod_unit(qos_class(spec), daemonset.pod.uid)
    slice_dir = guest_node.slice_dir(unit)
    assert daemonset.pod.cgroup_parent == guest_node.expanded_parent(unit)
    wanted = pod_resources(spec)
    assert read(slice_dir, "memory.max") == str(wanted.memory_bytes)
    assert read(slice_dir, "cpu.weight") == weight(daemonset, wanted.cpu_shares)
    for c in spec["containers"]:
        cid = daemonset.pod.containers[c["name"]]
        scope = cgroup_dir(daemonset.cri.container_pid(cid))
        assert scope == slice_dir / f"cri-containerd-{cid}.scope", scope
        memory = quantity(c["resources"]["limits"]["memory"])
        assert read(scope, "memory.max") == str(int(memory))


def test_containers_run_with_the_declared_security_context(daemonset: DaemonSetPod) -> None:
    check_security_context(daemonset)


def test_liveness_probes_pass(daemonset: DaemonSetPod) -> None:
    check_liveness_probes(daemonset)


def test_bridge_is_registered_with_this_containerd(daemonset: DaemonSetPod) -> None:
    check_registered(daemonset)


def test_policy_server_writes_v2_pod_slices(daemonset: DaemonSetPod) -> None:
    state = policy_state(daemonset)
    assert state["cgroups"]["version"] == "2", state
    assert state["cgroups"]["writable"] is True, state
    assert state["reconciler"]["running"] is True, state
    # A stock kernel: the production rules' group identity never reaches a container.
    assert state["group_identity"]["container_unified"] is False, state
    log = daemonset.log("policy-server")
    assert "pod cgroup writes cannot take effect" not in log, log
    assert log.count("group identity on containers is off") == 1, log


def test_lsr_pod_is_pinned_and_unthrottled(daemonset: DaemonSetPod) -> None:
    lsr_pod_is_pinned(daemonset, "lsr")


def lsr_pod_is_pinned(ds: DaemonSetPod, name: str) -> None:
    cri = ds.cri
    assert isinstance(cri, SystemdKubeletCri)
    # kubelet's slice for the pod carries a quota (0.5 CPU) before the sandbox runs.
    pod = guest_node.run_pod(
        cri,
        name,
        "guaranteed",
        cpu_quota_per_sec_us=500_000,
        labels={QOS_LABEL: "LSR"},
        annotations={RESOURCE_STATUS: json.dumps({"cpuset": "1"})},
    )
    cid = cri.run_container(pod.pod, resources={"cpu_quota": 100000, "cpu_period": 100000})
    guest_node.wait_value(pod.directory, "cpu.max", "max 100000")
    scope = cgroup_dir(cri.container_pid(cid))
    assert read(scope, "cpuset.cpus") == "1", ds.logs()
    assert read(scope, "cpu.max").split()[0] == "max", ds.logs()
    # Drift written by hand into the pod slice: the shipped reconciler repairs it.
    (pod.directory / "cpu.max").write_text("50000 100000\n")
    guest_node.wait_value(pod.directory, "cpu.max", "max 100000", timeout_s=REPAIR_TIMEOUT_S)
    cri.stop_pod(pod.pod.id)
    cri.remove_pod(pod.pod.id)


def test_ls_pod_starts_with_the_values_kubelet_asked_for(daemonset: DaemonSetPod) -> None:
    """The production rules on a stock kernel (issue 24 finding 1): LS containers start, and
    with no topology in the rules koordinator-qos leaves their cpuset and weights alone."""
    cri = daemonset.cri
    assert isinstance(cri, SystemdKubeletCri)
    pod = guest_node.run_pod(cri, "ls", "burstable", cpu_weight=int(weight(daemonset, 1024)),
                             memory_max=BASE_MEMORY_BYTES, labels={QOS_LABEL: "LS"})  # fmt: skip
    cid = cri.run_container(pod.pod)
    scope = cgroup_dir(cri.container_pid(cid))
    assert scope.parent == pod.directory
    assert read(scope, "cpuset.cpus") == BASE_CPUSET
    assert read(scope, "cpu.weight") == weight(daemonset, BASE_CPU_SHARES)
    assert read(scope, "memory.max") == str(BASE_MEMORY_BYTES)
    assert read(pod.directory, "cpu.weight") == weight(daemonset, 1024)
    assert read(pod.directory, "memory.max") == str(BASE_MEMORY_BYTES)
    cri.stop_pod(pod.pod.id)
    cri.remove_pod(pod.pod.id)


# These two were marked xfail(run=False) on 2026-12-02 (docs/e2e.md#known-failures: BE failed, the
# OOM-score test did not end in 24 minutes and CI's guest bound stopped the guest with no
# result). Each is bounded now: its function alone (not the module fixture's image import) may
# take STUCK_TEST_S under emulation, and a failure names the step it was at and writes what the
# policy server saw (diagnose: its state, its own cgroup, the slice as the host and it read it,
# its log) to .e2e/node-v2/diag-<test>.txt, so one guest run says where and why.
STUCK_TEST_S = 900


class Stages:
    """The step a test is at, named in its failure (and in .e2e/node-v2/diag-<test>.txt)."""

    def __init__(self, ds: DaemonSetPod, test: str) -> None:
        self.ds, self.test, self.stage = ds, test, "start"
        self.directory: Path | None = None  # the pod slice, once made
        self.started = time.monotonic()
        self.deadline = self.started + STUCK_TEST_S - 120  # before pytest-timeout's signal

    def at(self, stage: str) -> None:
        if time.monotonic() > self.deadline:  # a slow step, past the bound but not stuck
            spent = time.monotonic() - self.started
            raise AssertionError(f"{self.test}: {spent:.0f} s and still at {self.stage!r}")
        self.stage = f"{stage} (at {time.monotonic() - self.started:.0f} s)"
        DIAG_DIR.mkdir(parents=True, exist_ok=True)
        (DIAG_DIR / f"stage-{self.test}.txt").write_text(self.stage + "\n")

    def __enter__(self) -> Stages:
        return self

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        text = diagnose(self.ds, self.test, self.directory, self.stage)
        if exc is not None and isinstance(exc, AssertionError):
            raise AssertionError(f"{exc}\nat stage {self.stage}\n{text[-6000:]}") from exc


@pytest.mark.timeout(STUCK_TEST_S, func_only=True)
def test_be_pod_slice_gets_the_batch_values(daemonset: DaemonSetPod) -> None:
    cri = daemonset.cri
    assert isinstance(cri, SystemdKubeletCri)
    with Stages(daemonset, "be") as st:
        batch = {"requests": {"kubernetes.io/batch-cpu": "300",
                              "kubernetes.io/batch-memory": "128Mi"},
                 "limits": {"kubernetes.io/batch-cpu": "600",
                            "kubernetes.io/batch-memory": "128Mi"}}  # fmt: skip
        st.at("run_pod")
        pod = guest_node.run_pod(cri, "be", "besteffort", labels={QOS_LABEL: "BE"}, annotations={
            EXTENDED_RESOURCE_SPEC: json.dumps({"containers": {"app": batch}})})  # fmt: skip
        st.directory = pod.directory
        st.at("run_container")
        cid = cri.run_container(pod.pod, name="app")
        # koordlet's batch formulas on the pod slice: weight from requests, quota and memory
        # from limits (no BE quota where the rules suppress BE CPU by cfsQuota: the production
        # rules).
        be_shares = shares(300)
        quota = "max" if daemonset.rules().cfs_quota_disabled else "60000"
        st.at("pod cpu.weight")
        guest_node.wait_value(pod.directory, "cpu.weight", weight(daemonset, be_shares))
        st.at("pod cpu.max")
        guest_node.wait_value(pod.directory, "cpu.max", f"{quota} 100000")
        st.at("pod memory.max")
        guest_node.wait_value(pod.directory, "memory.max", str(128 * MIB))
        st.at("container values")
        scope = cgroup_dir(cri.container_pid(cid))
        assert read(scope, "cpu.weight") == weight(daemonset, be_shares)
        assert read(scope, "memory.max") == str(128 * MIB)
        # Drift in the slice: repaired by the reconciler.
        st.at("drift repaired")
        (pod.directory / "memory.max").write_text("max\n")
        guest_node.wait_value(pod.directory, "memory.max", str(128 * MIB),
                              timeout_s=REPAIR_TIMEOUT_S)  # fmt: skip
        st.at("stop")
        cri.stop_pod(pod.pod.id)
        cri.remove_pod(pod.pod.id)


@pytest.mark.timeout(STUCK_TEST_S, func_only=True)
def test_oom_score_of_running_processes_is_kept(daemonset: DaemonSetPod) -> None:
    """The production overlay's hostPID and capabilities let the reconciler keep the OOM score
    of a running container process (OOMScoreAdj is on in the production rules)."""
    cri = daemonset.cri
    assert isinstance(cri, SystemdKubeletCri)
    with Stages(daemonset, "oom") as st:
        # Burstable: 500 is above kubelet's floor there (3); a BestEffort pod's is 1000 and a
        # lower score would be refused (a policy never makes a container stronger than kubelet
        # made it).
        st.at("run_pod")
        pod = guest_node.run_pod(cri, "oom", "burstable", annotations={OOM_SCORE_ADJ: "500"})
        st.directory = pod.directory
        st.at("run_container")
        cid = cri.run_container(pod.pod)
        st.at("score at creation")
        score = Path(f"/proc/{cri.container_pid(cid)}/oom_score_adj")
        assert score.read_text().strip() == "500"
        st.at("score repaired")
        score.write_text("0\n")
        guest_node.wait_value(score.parent, "oom_score_adj", "500", timeout_s=REPAIR_TIMEOUT_S)
        st.at("stop")
        cri.stop_pod(pod.pod.id)
        cri.remove_pod(pod.pod.id)


def test_a_posted_update_reaches_a_running_container_through_cri(
    daemonset: DaemonSetPod,
) -> None:
    check_update_reaches_a_running_container(daemonset, "update")


def test_containerd_restart_bridge_reconnects_and_polices(daemonset: DaemonSetPod) -> None:
    restart_containerd_under_the_pod(daemonset)
    lsr_pod_is_pinned(daemonset, "after-restart")
    check_update_reaches_a_running_container(daemonset, "update-after-restart")
