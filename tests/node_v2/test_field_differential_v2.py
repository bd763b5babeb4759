"""The field table's differential test (tests/e2e/test_field_differential.py) on the cgroup v2 +
systemd node: containerd 2.1.9 with runc 1.3, pods in kubelet's slices; the update routes read
the v2 files (memory.max, memory.swap.max, memory.low, cpuset.*, pids.max)."""

from __future__ import annotations

import pytest

from tests.e2e.containerd import Containerd
from tests.e2e.cri import CriClient
from tests.e2e.test_field_differential import run_differential

pytestmark = pytest.mark.node_v2
NODE_V2_WEIGHT = 53  # run-guest.sh's split: seconds in a guest / 10


def test_runtime_applies_what_the_field_table_says_on_systemd_v2(
    containerd: Containerd, clean_pods: CriClient, request: pytest.FixtureRequest
) -> None:
    run_differential(containerd, clean_pods, request,
                     lambda name: clean_pods.run_pod(name))
