"""The bridge starts without grpcio: it is imported on the first CRI call (bridge.cri)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.processes  # starts processes: not in make check


def test_starting_the_bridge_does_not_import_grpc() -> None:
    code = ("import sys, bridge.app, bridge.cli; "
            "print('grpc' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    assert done.stdout.strip() == "False"
