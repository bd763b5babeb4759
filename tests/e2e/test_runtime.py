"""The harness itself, with no NRI plugin: each containerd runs a pod and a container
through CRI, and the container's environment and cgroup v1 values are exactly what the
CRI request asked for. The bridge tests rely on this baseline to attribute changes."""

from __future__ import annotations

import pytest

from .containerd import Containerd
from .cri import BASE_CPU_SHARES, BASE_CPUSET, BASE_MEMORY_BYTES, CriClient
from .inspect_proc import cgroup_values, environ_after_exec

pytestmark = pytest.mark.e2e


def test_runtime_version(containerd: Containerd, cri: CriClient) -> None:
    version = cri.version()
    assert version.runtime_name == "containerd"
    assert containerd.runtime.version in version.runtime_version
    assert containerd.dirs.nri_socket.is_socket()


def test_pod_and_container_without_plugin(clean_pods: CriClient) -> None:
    cri = clean_pods
    pod = cri.run_pod("baseline")
    container_id = cri.run_container(pod)
    pid = cri.container_pid(container_id)

    env = environ_after_exec(pid)
    assert env.get("E2E_BASE") == "1"
    assert "NRI_E2E" not in env

    values = cgroup_values(pid)
    assert values.cpu_path == f"{pod.cgroup_parent}/{container_id}"
    assert values.cpu_shares == BASE_CPU_SHARES
    assert values.cpuset_cpus == BASE_CPUSET
    assert values.memory_limit_bytes == BASE_MEMORY_BYTES

    cri.update_cpu_shares(container_id, 768)
    assert cgroup_values(pid).cpu_shares == 768
