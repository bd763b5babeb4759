"""When to recompute every known container: a pure schedule, inputs in, next action out.

A full resync (every policy that handles Synchronize, from the bridge's state) is asked for at
start-up and after a configuration change; the node reconciler's periodic pass is due every
``--reconcile-interval`` seconds. A pass that could not use the bridge is retried: after
``RESYNC_RETRY_INITIAL_S`` while the bridge has not synchronized with the runtime or (within
``--bridge-start-wait`` of start-up, before it ever answered) its control socket is not up yet,
the expected start-up order; else with a back-off doubling up to ``RESYNC_RETRY_MAX_S``.

Owns that schedule as a value (``Schedule``) and its transitions (``requested``,
``config_applied``, ``tick``, ``nothing_to_do``, ``not_synchronized``, ``failed``,
``succeeded``), each a function of the schedule, the time and what happened. Must not: read a
clock, await, log or touch the bridge (``service.resync`` drives it).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

RESYNC_RETRY_INITIAL_S = 1.0
RESYNC_RETRY_MAX_S = 30.0


class ResyncAction(enum.Enum):
    """What a tick asks for."""

    NONE = "none"
    FULL = "full"  # a full resync (which includes the reconciler's pass)
    PERIODIC = "periodic"  # the node reconciler's periodic pass only


@dataclass(frozen=True, slots=True)
class Schedule:
    """Where the resync stands; ``started`` and ``last_reconcile`` are monotonic seconds."""

    started: float
    last_reconcile: float
    pending: bool = False  # a full resync is owed
    requests: int = 0  # full resyncs asked for so far (one asked during a pass stays pending)
    periodic: bool = False  # the reconciler's periodic pass is owed
    backoff_s: float = RESYNC_RETRY_INITIAL_S
    next_attempt: float = 0.0
    bridge_answered: bool = False  # the control socket has accepted a connection once


def requested(s: Schedule) -> Schedule:
    """A full resync is asked for."""
    return replace(s, pending=True, requests=s.requests + 1)


def config_applied(s: Schedule) -> Schedule:
    """A policy applied a new configuration: a full resync now, whatever the back-off."""
    return replace(requested(s), next_attempt=0.0, backoff_s=RESYNC_RETRY_INITIAL_S)


def tick(s: Schedule, now: float, reconcile_every_s: float,
         busy: bool) -> tuple[Schedule, ResyncAction]:
    """One poll tick: the reconciler's pass becomes due every ``reconcile_every_s`` (0: never);
    a pass runs unless one is running (``busy``) or the retry time has not come."""
    if reconcile_every_s > 0 and now - s.last_reconcile >= reconcile_every_s:
        s = replace(s, last_reconcile=now, periodic=True)
    if busy or now < s.next_attempt:
        return s, ResyncAction.NONE
    if s.pending:
        return s, ResyncAction.FULL
    return s, ResyncAction.PERIODIC if s.periodic else ResyncAction.NONE


def nothing_to_do(s: Schedule) -> Schedule:
    """No bridge or no policy to resync: nothing is owed."""
    return replace(s, pending=False, periodic=False)


def not_synchronized(s: Schedule, now: float, full: bool) -> Schedule:
    """The bridge is up but not synchronized with the runtime: a full resync is retried soon; a
    periodic pass waits for the next interval."""
    if full:
        return replace(s, periodic=False, pending=True, next_attempt=now + RESYNC_RETRY_INITIAL_S)
    return replace(s, periodic=False)


def bridge_not_up_yet(s: Schedule, now: float, unreachable: bool, start_wait_s: float) -> bool:
    """True for the expected start-up order: the control socket is not there (``unreachable``),
    it never answered, and start-up was less than ``start_wait_s`` ago."""
    return unreachable and not s.bridge_answered and now - s.started < start_wait_s


def failed(s: Schedule, now: float, full: bool, unreachable: bool, start_wait_s: float) -> Schedule:
    """A pass failed; ``unreachable``: the control socket could not be reached."""
    s = replace(s, pending=s.pending or full)
    if bridge_not_up_yet(s, now, unreachable, start_wait_s):
        return replace(s, next_attempt=now + RESYNC_RETRY_INITIAL_S)
    return replace(
        s,
        bridge_answered=s.bridge_answered or not unreachable,  # it answered, unusably
        next_attempt=now + s.backoff_s,
        backoff_s=min(s.backoff_s * 2, RESYNC_RETRY_MAX_S),
    )


def succeeded(s: Schedule, full: bool, requests_before: int) -> Schedule:
    """A pass succeeded; ``requests_before``: ``requests`` when it started (a full resync asked
    for while it ran stays pending). A full pass includes the reconciler's."""
    done = full and s.requests == requests_before
    return replace(
        s,
        bridge_answered=True,
        pending=s.pending and not done,
        periodic=False,
        backoff_s=RESYNC_RETRY_INITIAL_S,
    )
