"""Linux core scheduling: cookies on container processes through ``prctl(PR_SCHED_CORE, ...)``.

Owns the prctl calls (behind a small ``Prctl`` interface so tests inject a fake kernel), the
capability probe, and koordlet's cookie assignment for one reconcile pass: every container of a
group shares one cookie (an existing cookie of the group is kept, else one is created on the
group's first process), containers of disabled pods get the default cookie 0 back.

The calls run in a short-lived thread of their own: sharing a cookie *from* a process gives the
calling thread that cookie, and a thread that ends takes it along.

Must not: touch processes other than those it is given, or raise out of ``apply``.
"""

from __future__ import annotations

import ctypes
import errno
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

# include/uapi/linux/prctl.h
PR_SCHED_CORE = 62
PR_SCHED_CORE_GET = 0
PR_SCHED_CORE_CREATE = 1
PR_SCHED_CORE_SHARE_TO = 2
PR_SCHED_CORE_SHARE_FROM = 3
PIDTYPE_PID = 0  # one thread
PIDTYPE_TGID = 1  # a whole process


class Prctl(Protocol):
    """The four core-sched operations; each raises ``OSError`` as the kernel reports it."""

    def get(self, pid: int) -> int: ...
    def create(self, pid: int) -> None: ...
    def share_to(self, pid: int) -> None: ...
    def share_from(self, pid: int) -> None: ...


class LinuxPrctl:
    """The real system call through libc."""

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._libc.prctl.argtypes = [
            ctypes.c_int,
            ctypes.c_ulong,
            ctypes.c_ulong,
            ctypes.c_ulong,
            ctypes.c_ulong,
        ]

    def _call(self, op: int, pid: int, scope: int, arg: int = 0) -> None:
        if self._libc.prctl(PR_SCHED_CORE, op, pid, scope, arg) != 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))

    def get(self, pid: int) -> int:
        cookie = ctypes.c_ulonglong(0)
        self._call(PR_SCHED_CORE_GET, pid, PIDTYPE_PID, ctypes.addressof(cookie))
        return cookie.value

    def create(self, pid: int) -> None:
        self._call(PR_SCHED_CORE_CREATE, pid, PIDTYPE_TGID)

    def share_to(self, pid: int) -> None:
        self._call(PR_SCHED_CORE_SHARE_TO, pid, PIDTYPE_TGID)

    def share_from(self, pid: int) -> None:
        self._call(PR_SCHED_CORE_SHARE_FROM, pid, PIDTYPE_PID)


def probe(prctl: Prctl | None = None) -> tuple[bool, str]:
    """(supported, why not): ask the kernel for our own cookie."""
    try:
        (prctl or LinuxPrctl()).get(0)
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            return False, "kernel without core scheduling (CONFIG_SCHED_CORE not set)"
        return False, f"prctl(PR_SCHED_CORE) failed: {exc.strerror}"
    except (AttributeError, TypeError) as exc:  # no prctl in this libc
        return False, f"prctl unavailable: {exc}"
    return True, ""


@dataclass(slots=True)
class CoreSchedOutcome:
    """What one pass did (PIDs per action) and what went wrong."""

    assigned: list[int] = field(default_factory=list)
    created: dict[str, int] = field(default_factory=dict)
    cleared: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _cookie(prctl: Prctl, pid: int) -> int | None:
    try:
        return prctl.get(pid)
    except OSError:
        return None  # the process is gone (restarting container): next pass


def _clear(prctl: Prctl, pids: Sequence[int], out: CoreSchedOutcome) -> None:
    # The worker thread starts with cookie 0 (no share_from yet): pushing it clears.
    for pid in pids:
        cookie = _cookie(prctl, pid)
        if not cookie:
            continue
        try:
            prctl.share_to(pid)
            out.cleared.append(pid)
        except OSError as exc:
            out.errors.append(f"clear cookie of pid {pid}: {exc.strerror}")


def _assign_group(
    prctl: Prctl, group: str, pids: Sequence[int], claimed: set[int], out: CoreSchedOutcome
) -> None:
    cookies = {pid: _cookie(prctl, pid) for pid in pids}
    alive = [pid for pid in pids if cookies[pid] is not None]
    if not alive:
        return
    # Keep the group's existing cookie (the first non-default one not owned by another group).
    target = next(
        (c for pid in alive if (c := cookies[pid]) and c not in claimed),
        None,
    )
    if target is None:
        try:
            prctl.create(alive[0])
            target = prctl.get(alive[0])
        except OSError as exc:
            out.errors.append(f"create cookie for group {group} on pid {alive[0]}: {exc.strerror}")
            return
        out.created[group] = alive[0]
        cookies[alive[0]] = target
    claimed.add(target)
    todo = [pid for pid in alive if cookies[pid] != target]
    if not todo:
        return
    source = next(pid for pid in alive if cookies[pid] == target)
    try:
        prctl.share_from(source)
    except OSError as exc:
        out.errors.append(f"take cookie of group {group} from pid {source}: {exc.strerror}")
        return
    for pid in todo:
        try:
            prctl.share_to(pid)
            out.assigned.append(pid)
        except OSError as exc:
            out.errors.append(f"assign cookie of group {group} to pid {pid}: {exc.strerror}")


def _run(prctl: Prctl, groups: Mapping[str, Sequence[int]],
         clear: Sequence[int]) -> CoreSchedOutcome:
    out = CoreSchedOutcome()
    _clear(prctl, clear, out)
    claimed: set[int] = set()
    for group in sorted(groups):
        _assign_group(prctl, group, groups[group], claimed, out)
    return out


def apply_core_cookies(prctl: Prctl, groups: Mapping[str, Sequence[int]],
          clear: Sequence[int]) -> CoreSchedOutcome:
    """Give every group's processes one cookie and the ``clear`` processes cookie 0.

    Runs in a fresh thread (see the module docstring) and waits for it.
    """
    result: list[CoreSchedOutcome] = []

    def work() -> None:
        try:
            result.append(_run(prctl, groups, clear))
        except Exception as exc:  # keep the reconciler alive whatever the kernel says
            result.append(CoreSchedOutcome(errors=[f"core scheduling pass failed: {exc!r}"]))

    worker = threading.Thread(target=work, name="core-sched", daemon=True)
    worker.start()
    worker.join()
    return result[0] if result else CoreSchedOutcome(errors=["core scheduling pass did not finish"])
