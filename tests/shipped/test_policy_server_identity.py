"""The policy server with exactly the shipped user and capabilities (issue 18's probe bug).

The DaemonSet runs nri-policy-server as UID 0 with every capability dropped
(components/node-effects adds SYS_RESOURCE and DAC_OVERRIDE). cgroupfs makes a hierarchy's
directory 0555 while pod cgroup files are root-owned 0644: without CAP_DAC_OVERRIDE the
directory is not writable, the files are. These tests run the real server on the host's cgroup
tree under ``setpriv`` with the identity read from the rendered manifests, and check that /proc
shows exactly that identity before trusting anything else.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.deploy.support import run_variants
from tests.policy_server.factory import envelope, pod

from .conftest import CGROUP_V1_ROOT
from .policy_server_proc import ShippedPolicyServer
from .security_context import Identity, assert_is

# Fixture set-up (image build, containerd, pods) counts towards the timeout: generous.
pytestmark = [pytest.mark.shipped, pytest.mark.timeout(600)]

QOS_LABEL = "koordinator.sh/qosClass"
RESOURCE_STATUS = "scheduling.koordinator.sh/resource-status"
EXTENDED_RESOURCE_SPEC = "node.koordinator.sh/extended-resource-spec"
MIB = 1024 * 1024


@contextlib.contextmanager
def running(server: ShippedPolicyServer) -> Iterator[ShippedPolicyServer]:
    server.start()
    try:
        server.wait_healthy()
        assert server.pid is not None
        assert_is(server.pid, server.identity)
        yield server
    finally:
        server.stop()


def post(server: ShippedPolicyServer, body: dict[str, object]) -> dict[str, object]:
    transport = httpx.HTTPTransport(uds=str(server.socket))
    with httpx.Client(transport=transport, base_url="http://policy", timeout=10.0) as client:
        reply = client.post("/v1/policies/koordinator-qos", json=body)
    assert reply.status_code == 200, reply.text
    out: dict[str, object] = reply.json()
    return out


def v1_file(parent: str, controller: str, name: str) -> int:
    return int((CGROUP_V1_ROOT / controller / parent.lstrip("/") / name).read_text().strip())


@pytest.mark.parametrize("overlay", list(run_variants().values()), ids=list(run_variants()))
def test_shipped_identity_writes_pod_cgroups_v1(overlay: Path, tmp_path: Path,
                                                 v1_pod_parent: str) -> None:
    with running(ShippedPolicyServer(tmp_path / "ps", CGROUP_V1_ROOT, overlay)) as server:
        state = server.state()
        assert state["mode"] == "on" and state["cgroups"]["version"] == "1"
        assert state["cgroups"] == {**state["cgroups"], "writable": True, "reason": ""}, (
            server.tail())
        assert "pod cgroup writes cannot take effect" not in server.raw_log()

        lsr = pod(uid="lsr", name="lsr", qos="LSR", cgroup_parent=v1_pod_parent,
                  annotations={RESOURCE_STATUS: {"cpuset": "1"}})
        assert v1_file(v1_pod_parent, "cpu", "cpu.cfs_quota_us") == 50000
        post(server, envelope("RunPodSandbox", pod=lsr))
        assert v1_file(v1_pod_parent, "cpu", "cpu.cfs_quota_us") == -1, server.tail()


def test_shipped_identity_writes_be_batch_values_v1(tmp_path: Path,
                                                    v1_besteffort_pod_parent: str) -> None:
    v1_pod_parent = v1_besteffort_pod_parent
    spec = {"containers": {"app": {
        "requests": {"kubernetes.io/batch-cpu": "300", "kubernetes.io/batch-memory": "128Mi"},
        "limits": {"kubernetes.io/batch-cpu": "600", "kubernetes.io/batch-memory": "128Mi"}}}}
    with running(ShippedPolicyServer(tmp_path / "ps", CGROUP_V1_ROOT)) as server:
        be = pod(uid="be", name="be", qos="BE", cgroup_parent=v1_pod_parent,
                 annotations={EXTENDED_RESOURCE_SPEC: spec})
        post(server, envelope("RunPodSandbox", pod=be))
        # koordlet's batch formulas: shares from requests, quota and memory from limits.
        assert v1_file(v1_pod_parent, "cpu", "cpu.shares") == 307, server.tail()
        assert v1_file(v1_pod_parent, "cpu", "cpu.cfs_quota_us") == 60000
        assert v1_file(v1_pod_parent, "memory", "memory.limit_in_bytes") == 128 * MIB


def test_a_non_root_identity_is_told_which_file_it_cannot_write(open_dir: Path,
                                                                v1_pod_parent: str) -> None:
    # Same dropped capabilities, another UID: the probe names the pod cgroup file, not the
    # hierarchy's directory: kubepods' (v1_pod_parent makes sure it exists, as kubelet does).
    nobody = Identity(uid=65532, gid=65532, groups=(65532,), added=(), no_new_privs=True)
    with running(ShippedPolicyServer(open_dir / "ps", CGROUP_V1_ROOT,
                                     as_identity=nobody)) as server:
        cgroups = server.state()["cgroups"]
    assert cgroups["writable"] is False
    assert cgroups["reason"] == (
        f"{CGROUP_V1_ROOT}/cpu/kubepods/cpu.cfs_quota_us is not writable by uid 65532 (pod "
        "cgroup files are root-owned: run as UID 0)")
    assert "pod cgroup writes cannot take effect" in server.raw_log()


@pytest.fixture
def cgroup2(tmp_path: Path) -> Iterator[Path]:
    """A private mount of the unified hierarchy (its root is 0555, as on a v2 node), with a
    kubepods cgroup. The hierarchy is the machine's (on this cgroup v1 host runc also makes its
    cgroups there, and another test or run may have made kubepods already): only a kubepods
    this fixture made is removed, nothing else in it."""
    mnt = tmp_path / "cgroup2"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "cgroup2", "none", str(mnt)], check=True)
    pods = mnt / "kubepods"
    made = not pods.is_dir()
    try:
        pods.mkdir(exist_ok=True)
        yield mnt
    finally:
        if made:
            with contextlib.suppress(OSError):
                pods.rmdir()
        subprocess.run(["umount", str(mnt)], check=True)


def test_shipped_identity_on_cgroup_v2(tmp_path: Path, cgroup2: Path) -> None:
    assert cgroup2.stat().st_mode & 0o777 == 0o555
    assert (cgroup2 / "kubepods").is_dir()
    with running(ShippedPolicyServer(tmp_path / "ps", cgroup2)) as server:
        cgroups = server.state()["cgroups"]
    # The keys this test is about (the state also says how cpu.weight is converted).
    assert {k: cgroups.get(k) for k in ("root", "version", "writable", "reason")} == {
        "root": str(cgroup2), "version": "2", "writable": True, "reason": ""}
    assert cgroups["cpu_weight"]["setting"] == "auto"

    # The same tree mounted read-only (as a hostPath without write access would be): said so.
    ro = tmp_path / "ro"
    ro.mkdir()
    subprocess.run(["mount", "--bind", "-o", "ro", str(cgroup2), str(ro)], check=True)
    try:
        with running(ShippedPolicyServer(tmp_path / "ps-ro", ro)) as server:
            cgroups = server.state()["cgroups"]
    finally:
        subprocess.run(["umount", str(ro)], check=True)
    assert cgroups["writable"] is False and cgroups["reason"] == f"{ro} is mounted read-only"
