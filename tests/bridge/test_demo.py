"""`make demo` end to end: the bridge, the policy server and the simulator as the demo runs them.

The quick start's first command; it broke once unnoticed (the example rules stopped naming
CPUs, so its rule change found nothing to change), hence this run of the real thing.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.processes  # starts processes: not in make check


@pytest.mark.timeout(300)
def test_the_demo_runs_its_scenario_and_pushes_the_rule_change() -> None:
    done = subprocess.run([sys.executable, "-m", "bridge.demo"], cwd=ROOT, capture_output=True,
                          text=True, timeout=280, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "invalid_value" not in done.stdout, done.stdout
    assert "CRI UpdateContainerResources -> api: cpuset=4-7" in done.stdout, done.stdout
