"""The node reconciler on a fake cgroup v2 tree whose runtime converts shares to ``cpu.weight``
with the quadratic formula (runc >= 1.3.2, crun >= 1.23): a settled node shows no drift, pod
weights are written as the runtime writes the containers', and a real weight change is found.

Built only from the server's public options and files, so it runs against older code too."""

from __future__ import annotations

import logging
from pathlib import Path

import httpx
import pytest

from policy_server.bridge_link.control_client import BridgeControl
from policy_server.node.execution import ExecutorMode
from policy_server.service import PolicyServer, ServerOptions
from tests.policy_server.factory import container, pod
from tests.policy_server.node.test_node_reconciler import FakeBridge, write

GI = 1 << 30
# Batch pods: batch-cpu request (milli-CPU) -> container and pod shares -> what runc >= 1.3.2
# writes, ceil(10^((L^2 + 125 L)/612 - 7/34)) with L = log2(shares). (runc 1.1.15's
# 1 + (shares - 2) * 9999 / 262142 gives 39, 20 and 79.)
PODS = {"u1": (1000, 1024, 100), "u2": (500, 512, 59), "u3": (2000, 2048, 174)}


def parent(uid: str) -> str:
    return f"/kubepods/besteffort/pod{uid}"


def batch_spec(milli: int) -> dict[str, object]:
    memory = {"kubernetes.io/batch-memory": "1Gi"}
    return {"containers": {"app": {
        "requests": {"kubernetes.io/batch-cpu": str(milli), **memory},
        "limits": {"kubernetes.io/batch-cpu": "1000", **memory}}}}  # fmt: skip


def v2_cgroup(root: Path, rel: str, **files: str) -> None:
    for name, value in files.items():
        write(root / rel.lstrip("/") / name.replace("__", "."), value)


def node(tmp_path: Path, **options: object) -> tuple[PolicyServer, FakeBridge, Path]:
    cg = tmp_path / "cgroup"
    write(cg / "cgroup.controllers", "cpuset cpu memory")
    pods, containers = [], []
    for uid, (milli, shares, weight) in PODS.items():
        # The pod cgroup still has kubelet's values, not the batch sums.
        v2_cgroup(cg, parent(uid), cpu__weight="1", cpu__max="max 100000", memory__max="max")
        # The container as the runtime made it from the shares NRI reports.
        path = f"{parent(uid)}/c{uid}"
        v2_cgroup(cg, path, cpu__weight=str(weight), cpu__max="100000 100000",
                  memory__max=str(GI), cgroup__procs="")  # fmt: skip
        pods.append(pod(pod_id=f"p{uid}", uid=uid, name=f"pod-{uid}", qos="BE",
                        cgroup_parent=parent(uid),
                        annotations={"node.koordinator.sh/extended-resource-spec":
                                     batch_spec(milli)}))  # fmt: skip
        c = container(cid=f"c{uid}", pod_id=f"p{uid}", cpu={"shares": shares, "quota": 100000},
                      memory_limit=GI)  # fmt: skip
        c["linux"]["cgroups_path"] = path
        containers.append(c)
    fake = FakeBridge(pods, containers)
    bridge = BridgeControl("http://bridge", transport=httpx.MockTransport(fake.handle))
    server = PolicyServer(
        ServerOptions(
            bridge_control="http://bridge",
            executor_mode=ExecutorMode.ON,
            cgroup_root=cg,
            resctrl_root=tmp_path / "no-resctrl",
            proc_root=tmp_path / "proc",
            **options,  # type: ignore[arg-type]
        ),
        bridge=bridge,
    )
    server.probe_node()
    return server, fake, cg


async def test_quadratic_weights_are_no_drift(tmp_path: Path) -> None:
    server, fake, cg = node(tmp_path)
    assert await server.resync.run_pass()
    assert server.reconciler is not None and server.reconciler.last is not None
    # No container update: every weight is what the runtime makes of the container's shares.
    assert fake.pushed == []
    assert "container" not in server.reconciler.last.found
    # The pods' batch sums (their containers' shares) written as the runtime writes shares.
    for uid, (_milli, _shares, weight) in PODS.items():
        assert (cg / parent(uid).lstrip("/") / "cpu.weight").read_text() == str(weight)
    # A second pass over the settled node finds nothing at all.
    await server.resync.run_pass()
    assert fake.pushed == [] and not server.reconciler.last.found


async def test_the_learned_formula_is_shown(tmp_path: Path) -> None:
    server, _fake, _cg = node(tmp_path)
    cgroups = server.node_state()["cgroups"]
    assert cgroups["cpu_weight"]["formula"] is None  # nothing seen before the first pass
    await server.resync.run_pass()
    cgroups = server.node_state()["cgroups"]
    assert cgroups["cpu_weight"]["setting"] == "auto"
    assert cgroups["cpu_weight"]["formula"] == "quadratic"


async def test_once_learned_a_changed_weight_is_drift(tmp_path: Path) -> None:
    server, fake, cg = node(tmp_path)
    await server.resync.run_pass()
    (cg / parent("u2").lstrip("/") / "cu2" / "cpu.weight").write_text("100\n")  # reset by someone
    await server.resync.run_pass()
    assert server.reconciler is not None and server.reconciler.last is not None
    assert server.reconciler.last.found["container"] == 1
    assert [u["container_id"] for u in fake.pushed] == ["cu2"]
    assert fake.pushed[0]["linux"]["resources"]["cpu"]["shares"] == 512


async def test_the_setting_wins_over_what_the_node_shows(tmp_path: Path) -> None:
    from policy_server.node.cpu_weight import WeightSetting  # not on older code

    server, fake, cg = node(tmp_path, cpu_weight_formula=WeightSetting.LINEAR)
    await server.resync.run_pass()
    # Told linear: every quadratic weight is a different one, and pods get linear's weights.
    assert sorted(u["container_id"] for u in fake.pushed) == ["cu1", "cu2", "cu3"]
    assert (cg / parent("u2").lstrip("/") / "cpu.weight").read_text() == "20"
    assert server.node_state()["cgroups"]["cpu_weight"] == {
        "setting": "linear", "formula": "linear", "reason": ""}  # fmt: skip


async def test_until_the_formula_is_known_weights_are_not_judged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "policy_server.node.cpu_weight")
    server, fake, cg = node(tmp_path)
    for uid in PODS:  # weights neither formula gives: nothing to learn from
        (cg / parent(uid).lstrip("/") / f"c{uid}" / "cpu.weight").write_text("7\n")
    await server.resync.run_pass()
    await server.resync.run_pass()
    assert server.reconciler is not None and server.reconciler.last is not None
    assert fake.pushed == [] and "container" not in server.reconciler.last.found
    # Pod weights are not judged either: kubelet's stays until the formula is known (the
    # other pod-level values are fixed).
    assert (cg / parent("u2").lstrip("/") / "cpu.weight").read_text() == "1\n"
    assert (cg / parent("u2").lstrip("/") / "cpu.max").read_text() == "100000"
    state = server.node_state()["cgroups"]["cpu_weight"]
    assert state["formula"] is None and "3 neither" in state["reason"]
    said = [r.getMessage() for r in caplog.records if "not known yet" in r.getMessage()]
    assert len(said) == 1 and "not judged" in said[0]
