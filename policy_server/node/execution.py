"""The shapes every node-effect executor shares: the mode, one apply call, what it did.

Owns ``ExecutorMode`` (``on`` writes, ``dry-run`` only logs, ``off`` is the explicit "report
only" choice), ``ApplyRun`` (one ``NodeExecutor.apply`` call: its mode, log context and
report), ``ExecutionReport``, ``ProbeResult``, ``Drift`` (what the reconciler's pass found and
fixed for one effect) and ``KindExecutor``, the row of the executor table
(``policy_server.node.executor``). Must not do I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Generic, TypeVar

from policy_server.node.cgroup_layout import CgroupVersion

E = TypeVar("E")


class ExecutorMode(StrEnum):
    OFF = "off"
    DRY_RUN = "dry-run"
    ON = "on"


@dataclass(slots=True)
class ExecutionReport:
    """What one ``apply`` call did."""

    written: list[str] = field(default_factory=list)
    logged: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    # Resctrl groups this call could not create (their rdt_class must not be handed out).
    missing_groups: list[str] = field(default_factory=list)
    # systemd unit properties set before the files were written ("<unit> CPUWeight=39").
    properties: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """Whether a part of the node can be written, and why not."""

    writable: bool
    reason: str = ""


@dataclass(slots=True)
class ApplyRun:
    """One apply call. ``cgroup_version``: looked at once per call, not per file (set by the
    cgroup writes' ``prepare``). ``lacking``: cgroup files this call found the kernel without
    (``cpu.bvt_warp_ns`` on a stock kernel), not opened again for the other pods of a
    Synchronize or a reconciler pass."""

    mode: ExecutorMode
    context: str
    report: ExecutionReport = field(default_factory=ExecutionReport)
    cgroup_version: CgroupVersion = CgroupVersion.AUTO
    lacking: set[str] = field(default_factory=set)


@dataclass(frozen=True, slots=True)
class Drift:
    """What keeping one effect found and fixed on the reconciler's pass, at ``level``."""

    level: str
    found: int = 0
    fixed: int = 0
    errors: tuple[str, ...] = ()


NO_DRIFT = Drift("")


@dataclass(frozen=True, slots=True)
class KindExecutor(Generic[E]):
    """How one kind of effect is carried out: ``apply`` at the event (every mode: an
    executor says itself what ``off`` and ``dry-run`` mean for it), after ``prepare`` saw all
    effects of the kind in the call; ``keep`` on the reconciler's pass (re-applied if the host
    drifted; ``level`` names the drift counter of cgroup writes: ``pod``, ``qos``). ``keep``
    None: the kind is done once, never re-applied."""

    apply: Callable[[E, ApplyRun], None]
    keep: Callable[[E, str], Drift] | None = None
    prepare: Callable[[Sequence[E], ApplyRun], None] | None = None
