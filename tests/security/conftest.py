"""Fixtures for the security tests: the attacker (attacker.py) and a work directory that it
may traverse, the way /tmp and /run's shared directories are traversable on a node."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.security.attacker import Attacker, attacker


@pytest.fixture
def evil() -> Attacker:
    return attacker()


@pytest.fixture
def workdir() -> Iterator[Path]:
    # Short (AF_UNIX paths are limited to 107 bytes) and traversable by other users, as the
    # node's shared directories are; what the products create inside keeps its own modes.
    path = Path(tempfile.mkdtemp(prefix="nwb-sec-", dir="/tmp"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
