"""`make check`'s selection (tests/in_process.py): a test that is not marked as starting
processes cannot start one, however it tries, so `make check` needs no tool, no runtime and
no server of another project; a marked one runs unguarded."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.in_process import MAY_START, Plugin, ProcessStarted, no_processes

ROOT = Path(__file__).resolve().parents[1]


def test_this_test_runs_under_the_guard() -> None:
    # Not marked: the plugin guards it, so even the interpreter cannot be started.
    with pytest.raises(ProcessStarted, match=r"pytestmark = pytest\.mark\.processes"):
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


class _Item:
    """What the guard reads of a test: its markers."""

    def __init__(self, *markers: str) -> None:
        self.markers = markers

    def get_closest_marker(self, name: str) -> pytest.Mark | None:
        return getattr(pytest.mark, name).mark if name in self.markers else None


@pytest.mark.parametrize("marker", MAY_START)
def test_a_marked_test_runs_unguarded(marker: str) -> None:
    # This test itself is guarded: inside the guard of a marked item, the real os.fork and
    # Popen are back; after it, they are refused again.
    guarded = (os.fork, subprocess.Popen.__init__)
    steps = Plugin._guarded(_Item(marker))  # type: ignore[arg-type]
    next(steps)
    assert (os.fork, subprocess.Popen.__init__) == guarded  # no second guard put on
    for _ in steps:
        pass
    with pytest.raises(ProcessStarted):
        os.fork()


def test_an_unmarked_test_is_guarded_even_with_other_markers() -> None:
    steps = Plugin._guarded(_Item("timeout", "parametrize"))  # type: ignore[arg-type]
    next(steps)
    try:
        with pytest.raises(ProcessStarted, match=r"os\.fork"):
            os.fork()
    finally:
        for _ in steps:
            pass


def test_an_unregistered_marker_is_an_error(pytester: pytest.Pytester) -> None:
    # --strict-markers (pyproject): a misspelt `processes` would leave a module guarded in
    # make test and deselected nowhere; it is refused at collection instead.
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile("import pytest\n\npytestmark = pytest.mark.proceses\n\n"
                        "def test_x() -> None:\n    pass\n")
    result = pytester.runpytest_inprocess("--strict-markers", "-p", "no:cacheprovider")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*'proceses' not found in `markers` configuration option*"])


def test_unmarked_tests_carry_no_marker(request: pytest.FixtureRequest) -> None:
    # This module is not marked: its tests are guarded and have no `processes` marker.
    assert request.node.get_closest_marker("processes") is None
