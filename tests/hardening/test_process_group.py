"""The hardening tests' Process helper: a child started with `own_group` takes the processes it
started down with it when killed, so a benchmark that fails mid-run leaves nothing behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.waiting import until

from .processes import Process

pytestmark = [pytest.mark.processes, pytest.mark.timeout(60)]

# A parent that starts a grandchild, writes its PID and waits: killing only the parent's PID
# would leave the grandchild running.
SCRIPT = "sleep 300 & echo $! > {pidfile}; wait"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purpose (its parent, this test's shell, has exited).
    return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"


async def _grandchild(tmp_path: Path, own_group: bool) -> tuple[Process, int]:
    pidfile = tmp_path / "grandchild.pid"
    proc = await Process.start(["bash", "-c", SCRIPT.format(pidfile=pidfile)],
                               tmp_path / "parent.log", own_group=own_group)
    await until(lambda: pidfile.exists() and pidfile.read_text().strip() != "",
                what="the grandchild's PID file", timeout_s=20.0)
    return proc, int(pidfile.read_text())


async def test_kill_stops_the_whole_group(tmp_path: Path) -> None:
    proc, grandchild = await _grandchild(tmp_path, own_group=True)
    assert _alive(grandchild)
    await proc.kill()
    await until(lambda: not _alive(grandchild), what="the grandchild to die", timeout_s=20.0)


async def test_without_a_group_the_grandchild_outlives_kill(tmp_path: Path) -> None:
    # The contrast the option exists for (and the proof the test above can fail).
    proc, grandchild = await _grandchild(tmp_path, own_group=False)
    try:
        await proc.kill()
        assert _alive(grandchild)
    finally:
        os.kill(grandchild, 9)
