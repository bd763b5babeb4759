"""Fixtures of the tests that run inside the cgroup v2 + systemd guest (`make node-v2`).

Owns: one private containerd 2.1.9 per test module, with the systemd cgroup driver and
runc 1.3 (a module may ask for runc 1.1 with ``RUNC = RUNC_1_1``, and a CNI pod network with
``POD_NETWORK = <directory of the CNI plugins>``: pods not on the host network); the e2e harness's
CRI client, pod clean-up and policy stack on top of it (tests/e2e/conftest.py), unchanged;
the containerd set up and torn down as the e2e tests' (tests/e2e/private_containerd.py).

Must not: run on a host (every test fails with a pointer to `make node-v2` there), or skip.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.conftest import (  # noqa: F401  (fixtures)
    clean_pods,
    start_stack,
)
from tests.e2e.containerd import Containerd
from tests.e2e.private_containerd import private_containerd, serving_cri
from tests.e2e.test_bridge import start_bridge  # noqa: F401  (a fixture)
from tests.shipped.image import pod_network

from .guest_node import RUNC_1_3, SystemdKubeletCri, guest_runtime, require_guest


@pytest.fixture(scope="module")
def containerd(request: pytest.FixtureRequest) -> Iterator[Containerd]:
    require_guest()
    runc = getattr(request.module, "RUNC", RUNC_1_3)
    plugins = getattr(request.module, "POD_NETWORK", None)
    module = request.module.__name__.rsplit(".", 1)[-1]
    with private_containerd(
            guest_runtime(runc), prefix="nri-v2-", log_name=f"node-v2-{module}-containerd.log",
            prepare=None if plugins is None else lambda c: pod_network(c, plugins)) as instance:
        yield instance


@pytest.fixture(scope="module")
def cri(containerd: Containerd, request: pytest.FixtureRequest) -> Iterator[SystemdKubeletCri]:
    """The e2e CRI client with kubelet's systemd-driver pod slices; a module may name the QoS
    slice of pods its tests make without one (``POD_QOS = "guaranteed"``)."""
    client = SystemdKubeletCri(containerd.dirs.address)
    client.default_qos = getattr(request.module, "POD_QOS", client.default_qos)
    with serving_cri(client):
        yield client
