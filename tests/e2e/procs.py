"""Stopping a child process the harness started, by its PID; the harness's time scale."""

from __future__ import annotations

import os
import signal
import subprocess

# Every wait of the harness is multiplied by this. 1 on a host; the cgroup v2 guest of
# `make node-v2` runs under software emulation, many times slower, and sets it
# (tests/node_v2/guest/run-tests.sh).
TIME_SCALE = float(os.environ.get("NRI_E2E_TIME_SCALE", "1"))


def scaled(seconds: float) -> float:
    """``seconds`` as this machine's harness waits them."""
    return seconds * TIME_SCALE


def stop_by_pid(proc: subprocess.Popen[bytes] | None, timeout_s: float) -> bool:
    """SIGTERM `proc`, SIGKILL it if it is still there after `timeout_s`.

    Returns True if it had to be killed. Does nothing for a process that is
    gone already (or None).
    """
    if proc is None or proc.poll() is not None:
        return False
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout_s)
        return False
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout_s)
        return True
