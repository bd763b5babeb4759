"""The node reconciler (one pass) against fake cgroup v1, proc and resctrl trees and a fake
bridge: drift in files is found, container fixes go through the bridge, pod-level ones are
written, OOM scores and kernel switches kept, resctrl groups of gone pods removed."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from policy_server.bridge_link.control_client import BridgeControl
from policy_server.node.execution import ExecutorMode
from policy_server.policies.koordinator_qos.rules_watcher import ReloadResult
from policy_server.service import PolicyServer, ServerOptions
from tests.policy_server.factory import container, pod
from tests.policy_server.node.test_resctrl import fake_resctrl

LSR_PARENT, BE_PARENT = "/kubepods/podu1", "/kubepods/besteffort/podu2"
V1_UNLIMITED = "9223372036854771712"
# The pinned pod's cgroups have drifted from what kubelet set, so its cpuset cannot be checked
# against kubelet's CPU limit: the scheduler's resource-status is trusted
# (docs/koordinator.md#trust).
RULES = """
features: {OOMScoreAdj: true, Resctrl: true}
node_slo: {resourceQOSStrategy: {beClass: {cpuQOS: {enable: true}}}}
trust: {annotations: [scheduling.koordinator.sh/resource-status]}
"""


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def cgroup(root: Path, rel: str, **files: str) -> None:
    controllers = {"cpu.": "cpu", "memory.": "memory", "cpuset.": "cpuset", "cgroup.": "cpu"}
    for name, value in files.items():
        name = name.replace("__", ".")
        controller = next(c for prefix, c in controllers.items() if name.startswith(prefix))
        write(root / controller / rel.lstrip("/") / name, value)


class FakeBridge:
    def __init__(self, pods: list[dict[str, Any]], containers: list[dict[str, Any]]) -> None:
        self.pods, self.containers = pods, containers
        self.pushed: list[dict[str, Any]] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/readyz":
            return httpx.Response(200, json={"ready": True})
        if request.url.path == "/v1/state":
            return httpx.Response(200, json={"pods": self.pods, "containers": self.containers})
        self.pushed.extend(json.loads(request.content)["update"])
        return httpx.Response(200, json={"failed": []})


def node(tmp_path: Path) -> tuple[PolicyServer, FakeBridge, Path]:
    cg = tmp_path / "cgroup"
    # An LSR pod pinned to CPU 1 whose pod quota and container files were reset by someone.
    cgroup(cg, LSR_PARENT, cpu__cfs_quota_us="50000", cpu__shares="1024",
           memory__limit_in_bytes=V1_UNLIMITED)
    cgroup(cg, f"{LSR_PARENT}/c1", cpu__cfs_quota_us="50000", cpu__shares="1024",
           cpuset__cpus="0-1", memory__limit_in_bytes=V1_UNLIMITED, cgroup__procs="101\n102")
    # A BE pod whose pod cgroup has kubelet's values, not the batch sums.
    cgroup(cg, BE_PARENT, cpu__cfs_quota_us="-1", cpu__shares="2",
           memory__limit_in_bytes=V1_UNLIMITED)
    # An Anolis-like kernel's kube-QoS level for BestEffort pods, still at 0.
    cgroup(cg, "/kubepods/besteffort", cpu__bvt_warp_ns="0")
    proc = tmp_path / "proc"
    write(proc / "101" / "oom_score_adj", "0")
    write(proc / "102" / "oom_score_adj", "-500")
    write(proc / "sys" / "kernel" / "sched_group_identity_enabled", "0")
    write(proc / "sys" / "kernel" / "sched_core", "1")
    resctrl = fake_resctrl(tmp_path / "resctrl").root
    (resctrl / "koordlet-gone").mkdir()  # a pod removed while we were down
    spec = {"containers": {"app": {
        "requests": {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "1Gi"},
        "limits": {"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": "1Gi"}}}}
    pods = [
        pod(pod_id="p1", uid="u1", qos="LSR", cgroup_parent=LSR_PARENT, annotations={
            "scheduling.koordinator.sh/resource-status": {"cpuset": "1"},
            "koordinator.sh/oom-score-adj": "-500",
            "node.koordinator.sh/resctrl": {"llc": {"schemata": {"range": [0, 30]}}}}),
        pod(pod_id="p2", uid="u2", qos="BE", cgroup_parent=BE_PARENT,
            annotations={"node.koordinator.sh/extended-resource-spec": spec}),
    ]  # fmt: skip
    c1 = container(cid="c1", pod_id="p1", cpu={"cpus": "1", "quota": -1, "shares": 1024})
    c1["linux"]["cgroups_path"] = f"{LSR_PARENT}/c1"  # the bridge still believes NRI's values
    fake = FakeBridge(pods, [c1])
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    bridge = BridgeControl("http://bridge", transport=httpx.MockTransport(fake.handle))
    server = PolicyServer(ServerOptions(
        rules_path=rules, bridge_control="http://bridge", executor_mode=ExecutorMode.ON,
        cgroup_root=cg, resctrl_root=resctrl, proc_root=proc), bridge=bridge)  # fmt: skip
    server.probe_node()
    return server, fake, tmp_path


async def test_one_pass_finds_and_fixes_drift_everywhere(tmp_path: Path) -> None:
    server, fake, root = node(tmp_path)
    assert await server.resync.run_pass()
    cg, proc = root / "cgroup", root / "proc"
    # Container: the file values (quota 50000, cpus 0-1) differ from the decision.
    assert fake.pushed == [{"container_id": "c1",
                            "linux": {"resources": {"cpu": {"quota": -1, "cpus": "1"}}}}]
    # Pod level, written directly.
    assert (cg / "cpu" / "kubepods/podu1/cpu.cfs_quota_us").read_text() == "-1"
    be = cg / "cpu" / "kubepods/besteffort/podu2"
    assert (be / "cpu.shares").read_text() == "512"  # milli-CPU 500 -> shares
    assert (be / "cpu.cfs_quota_us").read_text() == "100000"
    assert (cg / "memory/kubepods/besteffort/podu2/memory.limit_in_bytes").read_text() == str(
        1 << 30)
    # The BestEffort kube-QoS level takes the BE class's group identity.
    assert (cg / "cpu/kubepods/besteffort/cpu.bvt_warp_ns").read_text() == "-1"
    # OOM score of every process of the container; the one already right is left alone.
    assert (proc / "101" / "oom_score_adj").read_text() == "-500\n"
    # Group identity is on: core scheduling off, identity on.
    kernel = proc / "sys" / "kernel"
    assert (kernel / "sched_group_identity_enabled").read_text() == "1\n"
    assert (kernel / "sched_core").read_text() == "0\n"
    # Resctrl: the live pod's group exists, the gone pod's is removed.
    assert sorted(p.name for p in (root / "resctrl").iterdir() if p.name.startswith("koordlet")) \
        == ["koordlet-u1"]
    metrics = server.metrics.render().decode()
    for level, count in (("container", 1), ("pod", 4), ("qos", 1), ("oom", 1), ("sysctl", 2),
                         ("resctrl", 2)):
        assert f'policy_reconcile_drift_found_total{{level="{level}"}} {count}.0' in metrics
        assert f'policy_reconcile_drift_fixed_total{{level="{level}"}} {count}.0' in metrics
    last = server.node_state()["reconciler"]["last_pass"]
    assert last["drift_found"]["pod"] == 4 and not last["errors"]


async def test_second_pass_finds_nothing(tmp_path: Path) -> None:
    server, fake, root = node(tmp_path)
    await server.resync.run_pass()
    # What NRI would have done with the pushed update.
    c = root / "cgroup"
    (c / "cpu/kubepods/podu1/c1/cpu.cfs_quota_us").write_text("-1\n")
    (c / "cpuset/kubepods/podu1/c1/cpuset.cpus").write_text("1\n")
    fake.pushed.clear()
    await server.resync.run_pass()
    assert fake.pushed == []
    assert server.reconciler is not None and server.reconciler.last is not None
    assert not server.reconciler.last.found
    # Each pass's wall time is a histogram sample.
    assert b"policy_reconcile_pass_seconds_count 2.0" in server.metrics.render()


async def test_report_only_mode_writes_nothing(tmp_path: Path) -> None:
    server, fake, root = node(tmp_path)
    server.executor.mode = ExecutorMode.OFF
    server.probe_node()
    await server.resync.run_pass()
    # The bridge's view has nothing to change and files are not read in report-only mode.
    assert fake.pushed == []
    assert (root / "cgroup/cpu/kubepods/podu1/cpu.cfs_quota_us").read_text() == "50000\n"
    assert (root / "proc/101/oom_score_adj").read_text() == "0\n"
    assert server.node_state()["cgroups"]["writable"] is False


async def test_an_unexpected_failure_is_retried_not_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, _fake, _root = node(tmp_path)
    assert server.reconciler is not None

    async def boom() -> None:
        raise RuntimeError("host surprise")

    monkeypatch.setattr(server.reconciler, "run", boom)
    assert await server.resync.run_pass() is False
    assert 'policy_resyncs_total{result="failed"} 1.0' in server.metrics.render().decode()


async def test_the_periodic_pass_runs_the_reconciler_on_its_timer(tmp_path: Path) -> None:
    server, _fake, root = node(tmp_path)
    assert server.reconciler is not None and server.reconciler.last is None
    await server.resync.on_poll(ReloadResult.UNCHANGED)  # the interval (10 s) has not passed
    assert server.reconciler.last is None
    due = server.resync.schedule.last_reconcile - server.options.reconcile_interval_s
    server.resync.schedule = replace(server.resync.schedule, last_reconcile=due)
    await server.resync.on_poll(ReloadResult.UNCHANGED)
    assert server.reconciler.last is not None and server.reconciler.last.fixed["pod"] == 4
    assert (root / "cgroup/cpu/kubepods/podu1/cpu.cfs_quota_us").read_text() == "-1"
