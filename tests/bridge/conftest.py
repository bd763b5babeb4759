"""Fixtures for the bridge tests that run the simulated runtime (simulator, transport,
control; helpers live in tests/bridge/simulator/harness.py)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridge.proto.nri import api_pb2 as api
from bridge.simulator.synthetic import template


@pytest.fixture
def sock_path() -> Iterator[Path]:
    # Short path: AF_UNIX paths are limited to 107 bytes and pytest's tmp_path can be long.
    base = Path(tempfile.mkdtemp(prefix="nrisim-"))
    try:
        yield base / "nri" / "nri.sock"
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def pod_and_container() -> tuple[api.PodSandbox, api.Container]:
    return template()
