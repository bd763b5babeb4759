"""Fixtures of the as-shipped tests (``make shipped``): root, and a private cgroup parent.

Owns: failing (never skipping) when not root, and private cgroup directories under every v1
controller hierarchy, removed afterwards.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

CGROUP_V1_ROOT = Path("/sys/fs/cgroup")
V1_CONTROLLERS = ("cpu", "memory")


@pytest.fixture(autouse=True)
def _root() -> None:
    if os.geteuid() != 0:
        pytest.fail("the as-shipped tests need root (make shipped)", pytrace=False)


@pytest.fixture
def v1_pod_parent() -> Iterator[str]:
    """``/nri-shipped-<id>/pod<uid>`` made in the cpu and memory hierarchies as kubelet
    makes pod cgroups, with a CFS quota and a memory limit the policy server must replace."""
    top = f"nri-shipped-{uuid.uuid4().hex[:12]}"
    parent = f"/{top}/pod{uuid.uuid4()}"
    made: list[Path] = []
    for controller in V1_CONTROLLERS:
        d = CGROUP_V1_ROOT / controller / parent.lstrip("/")
        d.mkdir(parents=True)
        made += [d, d.parent]
    (CGROUP_V1_ROOT / "cpu" / parent.lstrip("/") / "cpu.cfs_quota_us").write_text("50000\n")
    yield parent
    for d in made:
        with contextlib.suppress(OSError):
            d.rmdir()


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A private directory whose parents a non-root UID can traverse (pytest's are 0700)."""
    d = Path(tempfile.mkdtemp(prefix="nri-shipped-", dir="/tmp"))
    d.chmod(0o711)
    yield d
    shutil.rmtree(d, ignore_errors=True)
