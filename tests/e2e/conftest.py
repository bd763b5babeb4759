"""pytest fixtures for the real-containerd e2e tests.

Owns: one private containerd per runtime version per test module (parametrized over
RUNTIMES), a CRI client for it, and per-test pod clean-up. Logs of every instance are
copied to ``.e2e/logs/`` (git-ignored) so a failed CI run can be read afterwards.

Must not: skip silently. A missing runtime or image is a test failure that says to
run ``tests/e2e/setup/install-runtimes.sh``.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from .containerd import Containerd
from .cri import CriClient
from .runtimes import BUSYBOX_IMAGE, IMAGE_TARBALLS, PAUSE_IMAGE, RUNTIMES, InstanceDirs, Runtime

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]
LOG_DIR = REPO / ".e2e" / "logs"


def _require_installed(runtime: Runtime) -> None:
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


@pytest.fixture(scope="module", params=RUNTIMES, ids=lambda r: f"containerd-{r.version}")
def containerd(request: pytest.FixtureRequest) -> Iterator[Containerd]:
    runtime: Runtime = request.param
    _require_installed(runtime)
    # Short base path: Unix socket paths must stay under 108 bytes.
    base = Path(tempfile.mkdtemp(prefix=f"nri-e2e-{runtime.version}-", dir="/tmp"))
    instance = Containerd(runtime, InstanceDirs(base))
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
            keep_log(instance.dirs.log, f"{module}-containerd-{runtime.version}.log")
            instance.cleanup()


def _remove_all_pods(instance: Containerd) -> None:
    client = CriClient(instance.dirs.address)
    try:
        client.remove_all()
    finally:
        client.close()


@pytest.fixture(scope="module")
def cri(containerd: Containerd) -> Iterator[CriClient]:
    client = CriClient(containerd.dirs.address)
    try:
        client.wait_ready()
        for image in (PAUSE_IMAGE, BUSYBOX_IMAGE):
            client.wait_image(image)
        yield client
    finally:
        client.close()


@pytest.fixture
def clean_pods(containerd: Containerd, cri: CriClient) -> Iterator[CriClient]:
    """The CRI client; every pod the test made is stopped and removed afterwards."""
    yield cri
    if containerd.running():
        cri.remove_all()
