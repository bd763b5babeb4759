"""SIGTERM and SIGINT from a program's first line to its exit: a latch, never the default action.

Owns: the stop latch both programs (``nri-webhook-bridge``, ``nri-policy-server``) install as
the first thing their entry point does (``catch``) and keep until they exit (``held``): a stop
signal is remembered (``requested``) and, while a server runs, wakes it (``waking``); it never
kills the process and never raises inside whatever happened to be running. Once the program is
done, the stop signals are ignored: the interpreter's finalization puts Python handlers back to
the default action, so a SIGTERM landing then would still end the process with -15. Also the
test hook ``checkpoint`` that parks the process at a named phase
(tests/hardening/test_stop_phases.py sends SIGTERM there).

Must not: import anything beyond the standard library (it is loaded before the programs' own
imports, which take about a second), or do more in the handler than record and schedule.

The one window left is the interpreter's own start and, for the policy server, the import of
the ``policy_server`` package (the SDK) before its entry module runs: nothing exists yet then.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
# Test hook: a comma-separated list of phase names; the process stops itself (SIGSTOP) at each
# ``checkpoint`` so named, until it is continued (SIGCONT).
CHECKPOINT_ENV = "NRI_STOP_CHECKPOINT"

Wake = Callable[[], object]


class _Latch:
    """The process-wide state behind the module functions (signal handlers are process-wide)."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.wake: Wake | None = None
        self.previous: dict[int, Any] | None = None

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is None:
            self.signum = signum
        if self.wake is not None:
            self.wake()


_latch = _Latch()


def catch() -> None:
    """Install the latch for SIGTERM and SIGINT (again: no-op); ``held`` undoes it. A parent
    may have started us with them blocked: unblocked now, one held pending reaches the latch."""
    if _latch.previous is None:
        _latch.previous = {sig: signal.signal(sig, _latch.on_signal) for sig in STOP_SIGNALS}
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def stop_requested() -> int | None:
    """The first stop signal received since ``catch``, or None."""
    return _latch.signum


@contextlib.contextmanager
def held(*, process: bool) -> Iterator[None]:
    """The latch for the body of a program's ``main``. ``process``: main runs the process's own
    command line, so afterwards the stop signals are ignored until the process is gone;
    otherwise (a test calling main in-process) the previous handlers come back."""
    installed_here = _latch.previous is None
    catch()
    try:
        yield
    finally:
        if process:
            for stop in STOP_SIGNALS:
                signal.signal(stop, signal.SIG_IGN)
        elif installed_here:
            _restore()


def release() -> None:
    """For a program that turns out not to be a server (a one-shot command): the stop signals
    go back to their previous handlers (Ctrl-C stops it as Python's default does), and one
    received in the meantime is raised again now, to them."""
    signum = _restore()
    if signum is not None:
        signal.raise_signal(signum)


def _restore() -> int | None:
    """Put the handlers from before ``catch`` back; the stop signal received meanwhile."""
    previous, _latch.previous = _latch.previous, None
    signum, _latch.signum = _latch.signum, None
    for stop, old in (previous or {}).items():
        signal.signal(stop, old)
    return signum if previous is not None else None


@contextlib.contextmanager
def waking(wake: Wake) -> Iterator[None]:
    """While inside, a stop signal also calls ``wake`` (from the signal handler: it may only
    schedule, e.g. ``loop.call_soon_threadsafe``); at once if one was received already."""
    _latch.wake = wake
    try:
        if _latch.signum is not None:
            wake()
        yield
    finally:
        _latch.wake = None


def checkpoint(phase: str) -> None:
    """Test hook: stop this process here if ``NRI_STOP_CHECKPOINT`` names ``phase``."""
    if phase in os.environ.get(CHECKPOINT_ENV, "").split(","):
        os.kill(os.getpid(), signal.SIGSTOP)
