"""`make check`'s selection (tests/in_process.py): a test that is not listed as starting
processes cannot start one, however it tries, so `make check` needs no tool, no runtime and
no server of another project; the listed modules exist."""

from __future__ import annotations

import ast
import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.in_process import (
    ROOT,
    STARTS_PROCESSES,
    ProcessStarted,
    no_processes,
    starts_processes,
)


def test_this_test_runs_under_the_guard() -> None:
    # Not listed: the plugin guards it, so even the interpreter cannot be started.
    assert not starts_processes(Path(__file__))
    with pytest.raises(ProcessStarted, match=r"STARTS_PROCESSES in tests/in_process\.py"):
        subprocess.run([sys.executable, "-c", "pass"], check=True)


def test_every_way_to_start_a_process_is_refused() -> None:
    with no_processes():
        with pytest.raises(ProcessStarted, match="'kubectl' through subprocess"):
            subprocess.run(["kubectl", "version"], check=False)
        with pytest.raises(ProcessStarted):
            subprocess.Popen("promtool check rules x.yaml", shell=True)
        with pytest.raises(ProcessStarted, match=r"os\.fork"):
            os.fork()
        with pytest.raises(ProcessStarted, match=r"os\.system"):
            os.system("true")
        with pytest.raises(ProcessStarted, match=r"os\.posix_spawn"):
            os.posix_spawn("/bin/true", ["true"], {})

        async def spawn() -> None:
            await asyncio.create_subprocess_exec("dbus-daemon", "--session")
        with pytest.raises(ProcessStarted, match="'dbus-daemon'"):
            asyncio.run(spawn())


def test_git_is_allowed_and_everything_is_restored() -> None:
    before = (os.fork, os.system, subprocess.Popen.__init__)
    with no_processes():
        done = subprocess.run(["git", "rev-parse", "--is-inside-work-tree"], cwd=ROOT,
                              capture_output=True, text=True, check=False)
        assert done.returncode == 0 or "not a git repository" in done.stderr
    assert (os.fork, os.system, subprocess.Popen.__init__) == before


@pytest.mark.parametrize("listed", STARTS_PROCESSES)
def test_everything_listed_exists(listed: str) -> None:
    path, _, function = listed.partition("::")
    assert (ROOT / path).exists(), f"{path} is listed in STARTS_PROCESSES but is gone"
    if function:
        tree = ast.parse((ROOT / path).read_text())
        defined = {node.name for node in ast.walk(tree)
                   if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}
        assert function in defined, f"{listed} is listed in STARTS_PROCESSES but is gone"


def test_a_listed_directory_module_or_function_is_found() -> None:
    assert starts_processes(ROOT / "tests" / "servers" / "test_matrix.py")
    assert starts_processes(ROOT / "tests" / "hardening" / "test_soak.py", "test_anything")
    assert starts_processes(ROOT / "tests" / "test_waiting.py",
                            "test_until_exited_returns_the_exit_code")
    assert not starts_processes(ROOT / "tests" / "test_waiting.py",
                                "test_returns_the_first_true_value")
    assert not starts_processes(ROOT / "tests" / "test_in_process.py", "test_anything")


def test_listed_tests_carry_the_marker(request: pytest.FixtureRequest) -> None:
    # This test is not listed: it is guarded and has no `processes` marker.
    assert request.node.get_closest_marker("processes") is None
