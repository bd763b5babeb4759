"""The DaemonSet pod as kubelet runs it, from the built image, on containerd 1.7.24 and 2.1.9.

The pod comes from ``kubectl kustomize deploy/kubernetes/base`` (the rendered objects, never a
copy; the production overlay too, alone and with components/node-effects) and is created
over CRI with its declared volumes, users, groups, capabilities, read-only root and seccomp
profile (tests/shipped/kubelet.py); its probes run as kubelet runs them. Only
host paths move: /var/run/nri is the private containerd's NRI directory. Then workload pods are
created through CRI and koordinator-qos's values must reach their pod cgroups (written by the
policy server in its container, through the host cgroup mount) and their containers (through
NRI), also after containerd restarts under the running pod; an update posted to the bridge
reaches a running container through containerd's CRI socket (/run/containerd is the private
containerd's directory), before and after the restart.
"""

from __future__ import annotations

import json
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.deploy.support import render, run_variants
from tests.e2e.cgroup_scope import SHIPPED_PODS
from tests.e2e.containerd import Containerd
from tests.e2e.cri import CriClient
from tests.e2e.inspect_proc import cgroup_values

from .conftest import CGROUP_V1_ROOT
from .daemonset_pod import (
    DaemonSetPod,
    check_liveness_probes,
    check_registered,
    check_security_context,
    check_update_reaches_a_running_container,
    fake_resctrl,
    restart_containerd_under_the_pod,
    running,
)
from .image import BuiltImage
from .kubelet import Kubelet

# Fixture set-up (image build, containerd, pods) counts towards the timeout: generous.
pytestmark = [pytest.mark.shipped, pytest.mark.timeout(600)]

QOS_LABEL = "koordinator.sh/qosClass"
RESOURCE_STATUS = "scheduling.koordinator.sh/resource-status"
EXTENDED_RESOURCE_SPEC = "node.koordinator.sh/extended-resource-spec"
MIB = 1024 * 1024


VARIANTS = run_variants()


@pytest.fixture(scope="module", params=list(VARIANTS.values()), ids=list(VARIANTS))
def daemonset(
    request: pytest.FixtureRequest, node: Containerd, image: BuiltImage
) -> Iterator[DaemonSetPod]:
    cri = CriClient(node.dirs.address)
    workdir = Path(tempfile.mkdtemp(prefix="kubelet-", dir=node.dirs.base))
    kubelet = Kubelet(
        cri,
        workdir,
        SHIPPED_PODS,  # the shipped policy server writes beneath /kubepods only
        host_paths={
            "/var/run/nri": node.dirs.nri_socket.parent,
            "/run/containerd": node.dirs.address.parent,
            "/sys/fs/resctrl": fake_resctrl(node.dirs.base),
        },
    )
    try:
        with running(request.param, render(request.param), node, cri, kubelet, image) as ds:
            yield ds
    finally:
        cri.close()


def test_containers_run_with_the_declared_security_context(daemonset: DaemonSetPod) -> None:
    check_security_context(daemonset)


def test_liveness_probes_pass(daemonset: DaemonSetPod) -> None:
    check_liveness_probes(daemonset)


def test_bridge_is_registered_with_this_containerd(daemonset: DaemonSetPod) -> None:
    check_registered(daemonset)


def test_policy_server_can_write_pod_cgroups(daemonset: DaemonSetPod) -> None:
    policy = daemonset.kubelet.container_log(daemonset.pod, "policy-server")
    assert "pod cgroup writes cannot take effect" not in policy, policy


def test_policy_server_says_once_that_containers_get_no_unified_keys_on_v1(
    daemonset: DaemonSetPod,
) -> None:
    # This VM is cgroup v1: whatever the rules say (production: group_identity_kernel_support),
    # koordinator-qos never gives a container unified["cpu.bvt_warp_ns"] (runc refuses it).
    policy = daemonset.kubelet.container_log(daemonset.pod, "policy-server")
    assert not (CGROUP_V1_ROOT / "cgroup.controllers").exists()
    assert policy.count("group identity on containers is off: cgroup v1") == 1, policy


def kubelet_pod_cgroup() -> str:
    """A pod uid whose cpu cgroup exists with a CFS quota before the sandbox runs, as kubelet
    creates pod cgroups (so -1 afterwards can only be the policy server's write)."""
    uid = str(uuid.uuid4())
    d = CGROUP_V1_ROOT / "cpu" / SHIPPED_PODS / f"pod{uid}"
    d.mkdir(parents=True)
    (d / "cpu.cfs_quota_us").write_text("50000\n")
    return uid


def pod_int(controller: str, uid: str, name: str, level: str = "") -> int:
    """A pod cgroup's value; ``level``: the kube-QoS level the pod sits in (``besteffort``)."""
    prefix = f"{SHIPPED_PODS}/{level}" if level else SHIPPED_PODS
    return int((CGROUP_V1_ROOT / controller / prefix / f"pod{uid}" / name).read_text())


def lsr_pod_is_pinned(ds: DaemonSetPod, name: str) -> None:
    uid = kubelet_pod_cgroup()
    pod = ds.cri.run_pod(
        name,
        labels={QOS_LABEL: "LSR"},
        annotations={RESOURCE_STATUS: json.dumps({"cpuset": "1"})},
        uid=uid,
        cgroup_prefix=SHIPPED_PODS,
    )
    cid = ds.cri.run_container(pod, resources={"cpu_quota": 100000, "cpu_period": 100000})
    assert pod_int("cpu", uid, "cpu.cfs_quota_us") == -1, ds.logs()
    values = cgroup_values(ds.cri.container_pid(cid))
    assert values.cpuset_cpus == "1", (values, ds.logs())
    ds.cri.stop_pod(pod.id)
    ds.cri.remove_pod(pod.id)


def test_lsr_pod_is_pinned_with_pod_quota_minus_one(daemonset: DaemonSetPod) -> None:
    lsr_pod_is_pinned(daemonset, "lsr")


def test_be_pod_cgroup_gets_batch_values(daemonset: DaemonSetPod) -> None:
    batch = {
        "requests": {"kubernetes.io/batch-cpu": "300", "kubernetes.io/batch-memory": "128Mi"},
        "limits": {"kubernetes.io/batch-cpu": "600", "kubernetes.io/batch-memory": "128Mi"},
    }
    pod = daemonset.cri.run_pod(
        "be",
        labels={QOS_LABEL: "BE"},
        annotations={EXTENDED_RESOURCE_SPEC: json.dumps({"containers": {"app": batch}})},
        cgroup_prefix=f"{SHIPPED_PODS}/besteffort",  # a koordinator BE pod is kube-BestEffort
    )
    cid = daemonset.cri.run_container(pod, name="app")
    # koordlet's batch formulas on the pod cgroup: shares from requests, quota/memory from limits
    # (no BE quota where the rules suppress BE CPU by cfsQuota: the production overlay's).
    quota = -1 if daemonset.rules().cfs_quota_disabled else 60000
    assert pod_int("cpu", pod.uid, "cpu.shares", "besteffort") == 307, daemonset.logs()
    assert pod_int("cpu", pod.uid, "cpu.cfs_quota_us", "besteffort") == quota, daemonset.logs()
    assert pod_int("memory", pod.uid, "memory.limit_in_bytes", "besteffort") == 128 * MIB
    assert cgroup_values(daemonset.cri.container_pid(cid)).cpu_shares == 307
    daemonset.cri.stop_pod(pod.id)
    daemonset.cri.remove_pod(pod.id)


def test_a_posted_update_reaches_a_running_container_through_cri(
    daemonset: DaemonSetPod,
) -> None:
    check_update_reaches_a_running_container(daemonset, "update")


def test_containerd_restart_bridge_reconnects_and_polices(daemonset: DaemonSetPod) -> None:
    restart_containerd_under_the_pod(daemonset)
    lsr_pod_is_pinned(daemonset, "after-restart")
    # The directory mount sees the socket containerd made anew.
    check_update_reaches_a_running_container(daemonset, "update-after-restart")
