"""The guest is the node the issue asks for: cgroup v2 only, systemd as PID 1 with its
controllers delegated, containerd 2.1.9 with the systemd driver putting a pod's containers
in ``cri-containerd-<id>.scope`` under the pod slice kubelet made."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.containerd import Containerd
from tests.e2e.cri import CriClient

from . import guest_node
from .guest_node import CGROUP_ROOT, cgroup_dir, read

pytestmark = pytest.mark.node_v2
NODE_V2_WEIGHT = 3  # run-guest.sh's split: seconds in a guest / 10


def test_the_node_is_cgroup_v2_with_systemd() -> None:
    guest_node.require_guest()
    assert (CGROUP_ROOT / "cgroup.controllers").is_file(), "not the unified hierarchy"
    assert not (CGROUP_ROOT / "cpu").exists(), "a v1 hierarchy is mounted"
    assert Path("/proc/1/comm").read_text().strip() == "systemd"
    controllers = set(read(CGROUP_ROOT, "cgroup.controllers").split())
    assert {"cpu", "cpuset", "memory", "pids"} <= controllers, controllers


def test_pod_containers_are_scopes_in_the_pod_slice(
    containerd: Containerd, clean_pods: CriClient
) -> None:
    pod = guest_node.run_pod(clean_pods, "scope", memory_max=256 * 1024 * 1024)
    container_id = clean_pods.run_container(pod.pod)
    pid = clean_pods.container_pid(container_id)
    scope = cgroup_dir(pid)
    assert scope == pod.directory / f"cri-containerd-{container_id}.scope", scope
    assert read(pod.directory, "memory.max") == str(256 * 1024 * 1024)
    # The e2e container's own request: 1 CPU of shares, cpuset, memory limit.
    assert read(scope, "cpu.weight") == str(guest_node.runc_weight(containerd.runtime.runc, 1024))
