"""Waiting for what another task or process changes: the one poll loop every test uses.

A test polls only where the thing it waits for offers no event: a socket another process
creates, a readiness endpoint, a cgroup file the runtime writes, a log line. `wait_until`
(blocking) and `until` (async) call a check until it returns a true value and return that
value. When the time is up, or the process the wait depends on has exited first, they fail
with what was awaited and the caller's details (usually a log's tail), so a failure reads
as "X did not happen" rather than as a bare timeout.

Bounds here are generous on purpose: they catch what never happens, however busy the machine.
"""

from __future__ import annotations

import asyncio
import inspect
import socket
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar, overload

import httpx

from bridge.simulator.launched_plugin import PluginProcess

T = TypeVar("T")

Details = Callable[[], str]
ProcessLike = subprocess.Popen[bytes] | asyncio.subprocess.Process | PluginProcess


class WaitTimeout(AssertionError):
    """What a test waited for did not happen in time (or its process exited first)."""


def exit_code(proc: ProcessLike) -> int | None:
    """The process's exit code, or None while it runs (a Popen, an asyncio process or a
    simulator-launched plugin)."""
    if isinstance(proc, (subprocess.Popen, PluginProcess)):
        return proc.poll()
    return proc.returncode


def _failure(what: str, why: str, details: Details | None) -> WaitTimeout:
    text = f"{what}: {why}"
    if details is not None:
        text += "\n" + details()
    return WaitTimeout(text)


def _check_alive(what: str, proc: ProcessLike | None, details: Details | None) -> None:
    if proc is not None and (code := exit_code(proc)) is not None:
        raise _failure(what, f"the process exited with {code} first", details)


def wait_until(check: Callable[[], T | None], *, what: str, timeout_s: float,
               interval_s: float = 0.05, proc: ProcessLike | None = None,
               details: Details | None = None) -> T:
    """Call `check` until it returns a true value; return that value."""
    deadline = time.monotonic() + timeout_s
    while True:
        _check_alive(what, proc, details)
        if result := check():
            return result
        if time.monotonic() >= deadline:
            raise _failure(what, f"not within {timeout_s:g} s", details)
        time.sleep(interval_s)


@overload
async def until(check: Callable[[], Awaitable[T | None]], *, what: str, timeout_s: float,
                interval_s: float = 0.02, proc: ProcessLike | None = None,
                details: Details | None = None, in_thread: bool = False) -> T: ...


@overload
async def until(check: Callable[[], T | None], *, what: str, timeout_s: float,
                interval_s: float = 0.02, proc: ProcessLike | None = None,
                details: Details | None = None, in_thread: bool = False) -> T: ...


async def until(check: Callable[[], Any], *, what: str, timeout_s: float,
                interval_s: float = 0.02, proc: ProcessLike | None = None,
                details: Details | None = None, in_thread: bool = False) -> T:
    """`wait_until` for a test on the event loop.

    `check` may be a coroutine function; a blocking check (a connect, an HTTP probe) runs in
    a worker thread with `in_thread`, so the loop keeps serving the test's other tasks.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        _check_alive(what, proc, details)
        result = await asyncio.to_thread(check) if in_thread else check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result  # type: ignore[no-any-return]
        if time.monotonic() >= deadline:
            raise _failure(what, f"not within {timeout_s:g} s", details)
        await asyncio.sleep(interval_s)


# Checks several tests share.

def path_exists(path: Path) -> Callable[[], bool]:
    return path.exists


def accepts(path: Path) -> Callable[[], bool]:
    """True once something accepts connections on the Unix socket `path`."""
    def check() -> bool:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(1.0)
            try:
                probe.connect(str(path))
            except OSError:
                return False
            return True
    return check


def healthz(sock: Path, path: str = "/healthz") -> Callable[[], bool]:
    """True once the HTTP server on the Unix socket `sock` answers `path` with 200."""
    def check() -> bool:
        if not accepts(sock)():
            return False  # httpx would leave the socket of a refused connect open
        transport = httpx.HTTPTransport(uds=str(sock))
        with httpx.Client(transport=transport, base_url="http://local", timeout=2) as client:
            try:
                return client.get(path).status_code == 200
            except httpx.HTTPError:
                return False
    return check


def log_tail(log: Path, chars: int = 3000) -> Details:
    """Details for a failure: the end of a process's log."""
    def details() -> str:
        try:
            return f"--- {log} (end) ---\n" + log.read_text(errors="replace")[-chars:]
        except OSError as exc:
            return f"--- {log}: {exc}"
    return details


async def until_exited(proc: ProcessLike, *, what: str, timeout_s: float,
                       details: Details | None = None) -> int:
    """The exit code once `proc` has exited (it is not killed if it does not)."""
    await until(lambda: exit_code(proc) is not None, what=what, timeout_s=timeout_s,
                interval_s=0.05, details=details)
    code = exit_code(proc)
    assert code is not None
    return code
