"""deploy/systemd's units verified and run under a real systemd (PID 1 of a Debian node in a
podman container), next to containerd 1.7.24 with the shipped NRI snippet.

The node image installs the project by running docs/deployment.md's systemd block; the units
start at boot with their sandboxing as shipped (ProtectSystem=strict, ProtectKernelTunables,
ReadWritePaths=/sys/fs/cgroup, an empty capability bounding set, ...). A pod created through
the node's CRI must then get its koordinator-qos pod-level values, written by the policy server
unit into the pod cgroup, and an update posted to the bridge must reach a running container
through containerd's CRI socket from inside the bridge unit's sandbox.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.cri import CriClient
from tests.e2e.private_containerd import serving_cri

from .systemd_node import CGROUP_V1_ROOT, UNITS, SystemdNode, build

# Fixture set-up (image build, containerd, pods) counts towards the timeout: generous.
pytestmark = [pytest.mark.shipped, pytest.mark.timeout(600)]

QOS_LABEL = "koordinator.sh/qosClass"
RESOURCE_STATUS = "scheduling.koordinator.sh/resource-status"
EXTENDED_RESOURCE_SPEC = "node.koordinator.sh/extended-resource-spec"
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def node_image() -> str:
    return build()


@pytest.fixture(scope="module")
def node(node_image: str, containers_conf: Path) -> Iterator[SystemdNode]:
    n = SystemdNode(node_image, containers_conf)
    try:
        n.start()
        yield n
    finally:
        n.stop()


@pytest.fixture(scope="module")
def cri(node: SystemdNode) -> Iterator[CriClient]:
    with serving_cri(CriClient(node.cri_socket)) as client:
        yield client


def test_systemd_analyze_verify(node_image: str, node: SystemdNode) -> None:
    out = node.podman("run", "--rm", "--network", "none", node_image, "systemd-analyze",
                      "verify", *(f"/etc/systemd/system/{u}" for u in UNITS))
    assert out == ""


def test_units_are_active_and_the_bridge_registered(node: SystemdNode,
                                                    cri: CriClient) -> None:
    for unit in UNITS:
        assert node.is_active(unit) == "active", node.journal(unit)
    ready = node.exec("curl", "--fail", "--silent", "--show-error", "--unix-socket",
                      "/run/nri-webhook-bridge/control.sock", "http://bridge/readyz", check=False)
    assert ready, node.journal("nri-webhook-bridge.service")
    bridge_pid = node.exec("systemctl", "show", "--property", "MainPID", "--value",
                           "nri-webhook-bridge.service").strip()
    assert f'external:50-webhook-bridge[{bridge_pid}]\\" registered' in node.journal(
        "containerd.service")
    policy = node.journal("nri-policy-server.service")
    assert "pod cgroup writes cannot take effect" not in policy, policy


def kubelet_pod_cgroup(node: SystemdNode) -> str:
    uid = str(uuid.uuid4())
    d = node.pod_cgroup("cpu", uid)
    d.mkdir(parents=True)
    (d / "cpu.cfs_quota_us").write_text("50000\n")
    return uid


def pod_int(node: SystemdNode, controller: str, uid: str, name: str) -> int:
    return int((node.pod_cgroup(controller, uid) / name).read_text())


def test_node_effects_under_the_unit_sandbox(node: SystemdNode, cri: CriClient) -> None:
    def logs() -> str:
        return node.journal("nri-policy-server.service")[-3000:]

    uid = kubelet_pod_cgroup(node)
    pod = cri.run_pod("lsr", labels={QOS_LABEL: "LSR"},
                      annotations={RESOURCE_STATUS: json.dumps({"cpuset": "1"})}, uid=uid,
                      cgroup_prefix=node.pod_prefix)
    cid = cri.run_container(pod, resources={"cpu_quota": 100000, "cpu_period": 100000})
    assert pod_int(node, "cpu", uid, "cpu.cfs_quota_us") == -1, logs()
    # The container's own cgroup (cgroupfs driver: <pod cgroup>/<container id>), set via NRI.
    assert (node.pod_cgroup("cpuset", uid) / cid / "cpuset.cpus").read_text().strip() == "1"

    batch = {"requests": {"kubernetes.io/batch-cpu": "300", "kubernetes.io/batch-memory": "128Mi"},
             "limits": {"kubernetes.io/batch-cpu": "600", "kubernetes.io/batch-memory": "128Mi"}}
    # A koordinator BE pod is kube-BestEffort: its pod cgroup sits in the besteffort level.
    be = cri.run_pod("be", labels={QOS_LABEL: "BE"}, annotations={
        EXTENDED_RESOURCE_SPEC: json.dumps({"containers": {"app": batch}})},
        cgroup_prefix=f"{node.pod_prefix}/besteffort")
    cri.run_container(be, name="app")
    level = f"{node.pod_prefix}/besteffort/pod{be.uid}"
    assert int((CGROUP_V1_ROOT / "cpu" / level / "cpu.shares").read_text()) == 307, logs()
    memory = CGROUP_V1_ROOT / "memory" / level / "memory.limit_in_bytes"
    assert int(memory.read_text()) == 128 * MIB
    cri.remove_all()


def test_an_update_reaches_a_container_through_cri_from_the_unit_sandbox(
        node: SystemdNode, cri: CriClient) -> None:
    """POST /v1/updates, as the policy server pushes them: the bridge unit sends it to
    containerd's CRI socket (--cri-socket; ProtectSystem=strict leaves connect() alone)."""
    uid = str(uuid.uuid4())
    pod = cri.run_pod("update", uid=uid, cgroup_prefix=node.pod_prefix)
    cid = cri.run_container(pod)
    update = {"container_id": cid, "linux": {"resources": {"cpu": {"cpus": "0"}}}}
    answer = node.exec("curl", "--fail-with-body", "--silent", "--show-error", "--max-time",
                       "40", "--unix-socket", "/run/nri-webhook-bridge/control.sock", "--header",
                       "content-type: application/json", "--data",
                       json.dumps({"update": [update]}), "http://bridge/v1/updates",
                       check=False)  # fmt: skip
    journal = node.journal("nri-webhook-bridge.service")
    assert answer and json.loads(answer) == {"failed": []}, (answer, journal[-3000:])
    assert (node.pod_cgroup("cpuset", uid) / cid / "cpuset.cpus").read_text().strip() == "0"
    assert "updates go through CRI UpdateContainerResources" in journal
    cri.remove_all()
