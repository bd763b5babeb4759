"""Fixtures for the hardening tests (process helpers live in processes.py)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridge.proto.nri import api_pb2 as api
from bridge.simulator.synthetic import template


@pytest.fixture
def workdir() -> Iterator[Path]:
    # Short path: AF_UNIX paths are limited to 107 bytes and pytest's tmp_path can be long.
    path = Path(tempfile.mkdtemp(prefix="nwb-hard-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def sock_path(workdir: Path) -> Path:
    return workdir / "nri" / "nri.sock"


@pytest.fixture
def pod_and_container() -> tuple[api.PodSandbox, api.Container]:
    return template()
