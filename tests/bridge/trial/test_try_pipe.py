"""`try --output json | head` (issue 44.6): a reader that leaves before the output is written
ends it quietly, with no BrokenPipeError traceback, and the exit code still says what the trial
found. Real processes: the bridge's `try`, a policy server, a pipe whose read end is closed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO, bridge_config

pytestmark = pytest.mark.processes  # starts processes: not in make check

POD = str(REPO / "examples" / "pods" / sorted(
    p.name for p in (REPO / "examples" / "pods").glob("*.yaml"))[0])


def _try_into_a_closed_pipe(*args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.Popen([sys.executable, "-m", "bridge", "try", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader left (`| head` after its lines) before anything came
    try:
        stderr = proc.stderr.read()
        code = proc.wait(timeout=300)
    finally:
        proc.kill()
        proc.stderr.close()
    return subprocess.CompletedProcess(proc.args, code, "", stderr)


def test_a_reader_that_leaves_ends_the_output_quietly(tmp_path: Path,
                                                      policy_socket: Path) -> None:
    config = str(bridge_config(tmp_path, policy_socket))
    for output in ("json", "table"):
        done = _try_into_a_closed_pipe(POD, "--config", config, "--output", output)
        assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, (
            done.stderr)
        # What the same trial exits with when its output is read.
        read = subprocess.run([sys.executable, "-m", "bridge", "try", POD, "--config", config,
                               "--output", output], capture_output=True, text=True,
                              timeout=300, check=False)
        assert read.stdout.strip(), read.stderr
        assert done.returncode == read.returncode, (done.returncode, read.returncode,
                                                    done.stderr)
