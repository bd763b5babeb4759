"""One private containerd and its CRI client: the set-up and tear-down that the e2e, the
as-shipped and the node-v2 fixtures share (tests/e2e/conftest.py, tests/shipped/conftest.py,
tests/node_v2/conftest.py and the modules that run a node of their own).

Owns: failing (never skipping) when the run is not root or a runtime is not installed, one
containerd under a private /tmp base (started with the e2e images imported; at the end its
pods removed, its log kept in ``.e2e/logs/`` (git-ignored) for reading a failed CI run, its
files removed), and a CRI client that serves the e2e images.

Must not: know about NRI, the bridge or a policy; the fixtures choose the runtime, the base
name and the log name.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import pytest

from .containerd import Containerd
from .cri import CriClient
from .runtimes import BUSYBOX_IMAGE, IMAGE_TARBALLS, PAUSE_IMAGE, InstanceDirs, Runtime

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]
LOG_DIR = REPO / ".e2e" / "logs"

Client = TypeVar("Client", bound=CriClient)


def require_installed(runtime: Runtime) -> None:
    """Fail the test (with what to run) unless root and ``runtime`` with the images exist."""
    missing = [
        str(p)
        for p in (
            runtime.containerd,
            runtime.ctr,
            runtime.bin_dir / "containerd-shim-runc-v2",
            *IMAGE_TARBALLS,
        )
        if not p.exists()
    ]
    if os.geteuid() != 0:
        pytest.fail("the e2e tests need root (they run containerd)", pytrace=False)
    if missing:
        pytest.fail(
            f"containerd {runtime.version} prerequisites missing: {', '.join(missing)}; "
            "run `bash tests/e2e/setup/install-runtimes.sh` (make e2e does)",
            pytrace=False,
        )


def keep_log(source: Path, name: str) -> None:
    """Copy a log into .e2e/logs/ for post-mortem reading."""
    if source.exists():
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, LOG_DIR / name)


def remove_all_pods(instance: Containerd) -> None:
    """Stop and remove every pod on ``instance`` through CRI."""
    client = CriClient(instance.dirs.address)
    try:
        client.remove_all()
    finally:
        client.close()


@contextmanager
def private_containerd(runtime: Runtime, *, prefix: str, log_name: str,
                       prepare: Callable[[Containerd], None] | None = None
                       ) -> Iterator[Containerd]:
    """A started containerd of ``runtime`` under a new ``/tmp/<prefix>*`` base, with the e2e
    images imported; ``prepare`` (a pod network, say) runs before the start. Afterwards its
    pods are removed, its log is kept as ``log_name`` and its files are removed."""
    require_installed(runtime)
    # Short base path: Unix socket paths must stay under 108 bytes.
    base = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    instance = Containerd(runtime, InstanceDirs(base))
    if prepare is not None:
        prepare(instance)
    try:
        instance.start()
        instance.import_images()
        yield instance
    finally:
        try:
            if instance.running():
                remove_all_pods(instance)
        except Exception:
            log.exception("removing pods during teardown failed")
        finally:
            keep_log(instance.dirs.log, log_name)
            instance.cleanup()


def wait_serving(client: CriClient, *images: str) -> None:
    """Until CRI answers and sees the e2e images (and ``images``): ctr-imported images reach
    CRI asynchronously."""
    client.wait_ready()
    for image in (PAUSE_IMAGE, BUSYBOX_IMAGE, *images):
        client.wait_image(image)


@contextmanager
def serving_cri(client: Client) -> Iterator[Client]:
    """``client`` once it serves the e2e images (`wait_serving`); closed afterwards."""
    try:
        wait_serving(client)
        yield client
    finally:
        client.close()
