"""Which tests `make check` runs: those that run in the pytest process alone.

`make check` is the check a developer runs before each commit: no root, no apt, no tool
from `make tools`, no containerd or QEMU, no server of another project. Its tests are the
suite's in-process ones: they start no process (git aside: the repository checks read what
it tracks). A test module that starts one (the bridge or the policy server as a program, a
CLI run end to end, kubectl, promtool, dbus-daemon, nginx, a Go or Node server...) says so
itself with `pytestmark = pytest.mark.processes` (or one test function with
`@pytest.mark.processes`, where the module's other tests run in-process); `make check`
deselects those (``-m "not processes"``, beside pyproject's default deselection of e2e,
shipped and node_v2).

The markers are kept true by every run, `make test`'s included: in a test without one of
those markers (`processes`, `e2e`, `shipped`, `node_v2`), starting a process (subprocess,
asyncio's subprocesses, fork, spawn, exec) raises `ProcessStarted`, naming the marker. So
`make test`, which runs every test once, also proves `make check`'s selection.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

# Programs an in-process test may still run: git lists the tracked files.
ALLOWED_PROGRAMS = frozenset({"git"})


class ProcessStarted(AssertionError):
    """A test selected as in-process started a process."""


def _program(args: Any) -> str:
    if isinstance(args, str | bytes | os.PathLike):
        first = os.fsdecode(args).split()[0] if os.fsdecode(args).strip() else ""
    elif isinstance(args, Sequence) and args:
        first = os.fsdecode(args[0])
    else:
        first = ""
    return Path(first).name


def _refuse(what: str) -> ProcessStarted:
    return ProcessStarted(
        f"this test started a process ({what}): `make check` runs only in-process tests. "
        "mark its module `pytestmark = pytest.mark.processes` (or the test "
        "`@pytest.mark.processes`; make test still runs it; tests/in_process.py)")


@contextmanager
def no_processes() -> Iterator[None]:
    """While open, starting a process (other than ALLOWED_PROGRAMS) raises ProcessStarted."""
    real_init = subprocess.Popen.__init__

    def popen_init(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        program = _program(kwargs.get("executable") or args)
        if program not in ALLOWED_PROGRAMS:
            raise _refuse(f"{program or args!r} through subprocess")
        real_init(self, args, *rest, **kwargs)

    def refuse(name: str) -> Callable[..., Any]:
        def refused(*args: Any, **kwargs: Any) -> Any:
            raise _refuse(f"os.{name}")
        return refused

    patched = [name for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system",
                                 "execv", "execve", "execvp", "execvpe", "spawnv", "spawnve")
               if hasattr(os, name)]
    saved = {name: getattr(os, name) for name in patched}
    subprocess.Popen.__init__ = popen_init  # type: ignore[method-assign]
    for name in patched:
        setattr(os, name, refuse(name))
    try:
        yield
    finally:
        subprocess.Popen.__init__ = real_init  # type: ignore[method-assign]
        for name, real in saved.items():
            setattr(os, name, real)


# -- the pytest plugin (tests/conftest.py registers it, for examples/ too) ----------------------

# The markers of tests that may start processes.
MAY_START = ("processes", "e2e", "shipped", "node_v2")


class Plugin:
    """Guards every test that has none of the MAY_START markers."""

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Iterator[None]:
        yield from self._guarded(item)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Iterator[None]:
        yield from self._guarded(item)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Iterator[None]:
        yield from self._guarded(item)

    @staticmethod
    def _guarded(item: pytest.Item) -> Iterator[None]:
        if any(item.get_closest_marker(name) for name in MAY_START):
            yield
        else:
            with no_processes():
                yield
