"""The suite's one poll loop (tests/waiting.py): it returns what the check found, and fails
with what was awaited when the time is up or the awaited process has exited."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from tests.waiting import WaitTimeout, accepts, log_tail, until, until_exited, wait_until


def test_returns_the_first_true_value() -> None:
    values = iter([0, None, "", "found"])
    assert wait_until(lambda: next(values), what="a value", timeout_s=30, interval_s=0) == "found"


def test_times_out_naming_what_was_awaited_with_details(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("line one\nthe reason it never came up\n")
    with pytest.raises(WaitTimeout) as caught:
        wait_until(lambda: False, what="the server is ready", timeout_s=0, details=log_tail(log))
    text = str(caught.value)
    assert text.startswith("the server is ready: not within 0 s")
    assert "the reason it never came up" in text


def test_a_process_that_exits_first_fails_the_wait_at_once() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    proc.wait()
    with pytest.raises(WaitTimeout, match="socket appears: the process exited with 3 first"):
        wait_until(lambda: False, what="socket appears", timeout_s=300, proc=proc)


async def test_async_checks_are_awaited_and_blocking_ones_can_run_in_a_thread(
        tmp_path: Path) -> None:
    calls: list[int] = []

    async def third_time() -> bool:
        calls.append(1)
        return len(calls) == 3

    assert await until(third_time, what="the third call", timeout_s=30, interval_s=0) is True
    with pytest.raises(WaitTimeout, match="nothing listens"):
        await until(accepts(tmp_path / "none.sock"), what="nothing listens", timeout_s=0,
                    in_thread=True)


async def test_until_exited_returns_the_exit_code() -> None:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "raise SystemExit(7)")
    try:
        assert await until_exited(proc, what="the child exits", timeout_s=60) == 7
    finally:
        await proc.wait()
