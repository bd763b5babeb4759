"""Fixtures of the tests that run inside the cgroup v2 + systemd guest (`make node-v2`).

Owns: one private containerd 2.1.9 per test module, with the systemd cgroup driver and
runc 1.3 (a module may ask for runc 1.1 with ``RUNC = RUNC_1_1``, and a CNI pod network with
``POD_NETWORK = <directory of the CNI plugins>``: pods not on the host network); the e2e harness's
CRI client, pod clean-up and policy stack on top of it (tests/e2e/conftest.py), unchanged.

Must not: run on a host (every test fails with a pointer to `make node-v2` there), or skip.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import (  # noqa: F401  (fixtures)
    _remove_all_pods,
    _require_installed,
    clean_pods,
    keep_log,
    start_stack,
)
from tests.e2e.containerd import Containerd
from tests.e2e.runtimes import BUSYBOX_IMAGE, PAUSE_IMAGE, InstanceDirs
from tests.e2e.test_bridge import start_bridge  # noqa: F401  (a fixture)
from tests.shipped.image import pod_network

from .guest_node import RUNC_1_3, SystemdKubeletCri, guest_runtime, require_guest

log = logging.getLogger(__name__)


@pytest.fixture(scope="module")
def containerd(request: pytest.FixtureRequest) -> Iterator[Containerd]:
    require_guest()
    runc = getattr(request.module, "RUNC", RUNC_1_3)
    runtime = guest_runtime(runc)
    _require_installed(runtime)
    base = Path(tempfile.mkdtemp(prefix="nri-v2-", dir="/tmp"))
    instance = Containerd(runtime, InstanceDirs(base))
    plugins = getattr(request.module, "POD_NETWORK", None)
    if plugins is not None:
        pod_network(instance, plugins)
    try:
        instance.start()
        instance.import_images()
        yield instance
    finally:
        try:
            if instance.running():
                _remove_all_pods(instance)
        except Exception:
            log.exception("removing pods during teardown failed")
        finally:
            module = request.module.__name__.rsplit(".", 1)[-1]
            keep_log(instance.dirs.log, f"node-v2-{module}-containerd.log")
            instance.cleanup()


@pytest.fixture(scope="module")
def cri(containerd: Containerd, request: pytest.FixtureRequest) -> Iterator[SystemdKubeletCri]:
    """The e2e CRI client with kubelet's systemd-driver pod slices; a module may name the QoS
    slice of pods its tests make without one (``POD_QOS = "guaranteed"``)."""
    client = SystemdKubeletCri(containerd.dirs.address)
    client.default_qos = getattr(request.module, "POD_QOS", client.default_qos)
    try:
        client.wait_ready()
        for image in (PAUSE_IMAGE, BUSYBOX_IMAGE):
            client.wait_image(image)
        yield client
    finally:
        client.close()
