"""Stopping a child process the harness started, by its PID."""

from __future__ import annotations

import signal
import subprocess


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
