"""Stopping a child process that `try` or `test` started (the bridge, a private policy server).

Owns: SIGTERM by the process's own handle, then SIGKILL if it has not stopped within the
deadline. Must not: signal anything it was not given (no process groups, no names).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal


async def stop_process(proc: asyncio.subprocess.Process, timeout_s: float) -> None:
    """SIGTERM `proc`, SIGKILL it if it does not exit within `timeout_s`; wait for it."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), timeout_s)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await asyncio.wait_for(proc.wait(), timeout_s)
