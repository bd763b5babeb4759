"""The suite's one poll loop (tests/waiting.py): it returns what the check found, and fails
with what was awaited when the time is up or the awaited process has exited."""

from __future__ import annotations

import ast
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


@pytest.mark.processes
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


@pytest.mark.processes
async def test_until_exited_returns_the_exit_code() -> None:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "raise SystemExit(7)")
    try:
        assert await until_exited(proc, what="the child exits", timeout_s=60) == 7
    finally:
        await proc.wait()


# -- no private poll loop beside it --------------------------------------------------------

TESTS = Path(__file__).resolve().parent
# Loops that sleep but do not wait for a change: kubelet's readiness probing (its period is
# the behaviour modelled), the CRI churn's workers (they poll the runtime as kubelet does,
# counting calls), and a check that values hold for a while (the opposite of a wait).
NOT_WAITS = {"shipped/kubelet.py", "e2e/cri_churn.py", "node_v2/test_systemd_properties_v2.py"}


def _sleeps(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr == "sleep" for n in ast.walk(node))


def poll_loops(source: str) -> list[int]:
    """Lines of the `while` loops in `source` that sleep: a poll loop of their own."""
    return [node.lineno for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.While) and _sleeps(node)]


def test_a_while_loop_that_sleeps_is_found() -> None:
    assert poll_loops("import time\nwhile not ready():\n    time.sleep(0.1)\n") == [2]
    assert poll_loops("async def f():\n    while True:\n        await asyncio.sleep(0)\n") == [2]
    assert poll_loops("while queue:\n    queue.pop()\n") == []


def test_tests_poll_only_through_waiting() -> None:
    found = {}
    for path in sorted(TESTS.rglob("*.py")):
        name = path.relative_to(TESTS).as_posix()
        if name == "waiting.py" or name in NOT_WAITS or ".build" in path.parts:
            continue
        if lines := poll_loops(path.read_text()):
            found[name] = lines
    assert found == {}, f"poll with tests/waiting.py (wait_until / until) instead: {found}"
