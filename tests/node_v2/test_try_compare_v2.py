"""`try` for a systemd-driver cgroup v2 node, compared field by field with what containerd
2.1.9 sends there for the same manifest (tests/e2e/test_try_compare.py does the same for
cgroupfs on this host's cgroup v1): pod cgroup parent, container cgroups path, resources,
OOM score, env, mounts."""

from __future__ import annotations

import socket
from pathlib import PurePosixPath

import pytest

from bridge.kube import NodeSpec
from tests.e2e.containerd import Containerd
from tests.e2e.cri import CriClient
from tests.e2e.test_try_compare import compare_with_runtime

from . import guest_node

pytestmark = pytest.mark.node_v2
NODE_V2_WEIGHT = 8  # run-guest.sh's split: seconds in a guest / 10


def make_pod_slice(parent: str) -> None:
    """kubelet's systemd driver: the pod's slice exists before RunPodSandbox."""
    guest_node.ensure_qos_slices()
    guest_node.start_slice(PurePosixPath(parent).name, [])


def test_try_sends_what_containerd_sends_on_systemd_v2(
    containerd: Containerd, clean_pods: CriClient, request: pytest.FixtureRequest
) -> None:
    node = NodeSpec(cgroup_driver="systemd", name=socket.gethostname(), cgroup_version=2)
    compare_with_runtime(containerd, clean_pods, request, node, make_pod_slice)
