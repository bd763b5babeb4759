"""The resync schedule is a pure function of its inputs: no bridge, no clock, no event loop."""

from __future__ import annotations

from policy_server.service import resync_schedule as s
from policy_server.service.resync_schedule import (
    RESYNC_RETRY_INITIAL_S,
    RESYNC_RETRY_MAX_S,
    ResyncAction,
    Schedule,
)

START = 1000.0
EVERY_S = 10.0
WAIT_S = 60.0


def fresh() -> Schedule:
    return s.requested(Schedule(started=START, last_reconcile=START))


def test_a_requested_resync_runs_at_the_next_tick_unless_a_pass_is_running() -> None:
    assert s.tick(fresh(), START, EVERY_S, busy=False)[1] is ResyncAction.FULL
    assert s.tick(fresh(), START, EVERY_S, busy=True)[1] is ResyncAction.NONE
    idle = Schedule(started=START, last_reconcile=START)
    assert s.tick(idle, START + 1, EVERY_S, busy=False)[1] is ResyncAction.NONE


def test_the_periodic_pass_becomes_due_every_interval_and_never_without_one() -> None:
    idle = Schedule(started=START, last_reconcile=START)
    later, action = s.tick(idle, START + EVERY_S - 0.5, EVERY_S, busy=False)
    assert action is ResyncAction.NONE and later == idle
    due, action = s.tick(idle, START + EVERY_S, EVERY_S, busy=False)
    assert action is ResyncAction.PERIODIC and due.last_reconcile == START + EVERY_S
    # Marked due even while a pass runs: it runs at the next free tick.
    busy, action = s.tick(idle, START + EVERY_S, EVERY_S, busy=True)
    assert action is ResyncAction.NONE and busy.periodic
    assert s.tick(busy, START + EVERY_S + 1, EVERY_S, busy=False)[1] is ResyncAction.PERIODIC
    assert s.tick(idle, START + 10 * EVERY_S, 0.0, busy=False)[1] is ResyncAction.NONE


def test_failures_back_off_doubling_up_to_the_ceiling_and_a_success_resets() -> None:
    sched = s.succeeded(fresh(), True, 1)  # the bridge answered once
    sched = s.requested(sched)
    now, waits = START, []
    for _ in range(8):
        sched = s.failed(sched, now, full=True, unreachable=True, start_wait_s=WAIT_S)
        waits.append(sched.next_attempt - now)
        assert sched.pending
        assert s.tick(sched, now + waits[-1] - 0.1, 0.0, busy=False)[1] is ResyncAction.NONE
        now = sched.next_attempt
        assert s.tick(sched, now, 0.0, busy=False)[1] is ResyncAction.FULL
    assert waits[:4] == [1.0, 2.0, 4.0, 8.0] and waits[-1] == RESYNC_RETRY_MAX_S
    done = s.succeeded(sched, True, sched.requests)
    assert not done.pending and done.backoff_s == RESYNC_RETRY_INITIAL_S


def test_a_bridge_not_up_yet_is_retried_soon_until_the_start_wait_is_over() -> None:
    sched = fresh()
    assert s.bridge_not_up_yet(sched, START + 5, True, WAIT_S)
    waited = s.failed(sched, START + 5, True, True, WAIT_S)
    assert waited.next_attempt == START + 5 + RESYNC_RETRY_INITIAL_S
    assert waited.backoff_s == RESYNC_RETRY_INITIAL_S and not waited.bridge_answered
    # Past the wait, or with any other failure, it is a failure with back-off.
    assert not s.bridge_not_up_yet(sched, START + WAIT_S, True, WAIT_S)
    late = s.failed(sched, START + WAIT_S, True, True, WAIT_S)
    assert late.backoff_s == 2 * RESYNC_RETRY_INITIAL_S and not late.bridge_answered
    other = s.failed(sched, START + 5, True, False, WAIT_S)
    assert other.bridge_answered and other.backoff_s == 2 * RESYNC_RETRY_INITIAL_S
    # A socket that answered once and vanished is a failure, not the start-up order.
    answered = s.succeeded(sched, True, sched.requests)
    assert not s.bridge_not_up_yet(answered, START + 5, True, WAIT_S)


def test_a_resync_asked_for_during_a_pass_stays_pending() -> None:
    sched = fresh()
    before = sched.requests
    sched = s.requested(sched)  # a configuration changed while the pass ran
    assert s.succeeded(sched, True, before).pending
    assert not s.succeeded(sched, True, sched.requests).pending
    assert s.succeeded(sched, False, sched.requests).pending  # a periodic pass is not a resync


def test_an_unsynchronized_bridge_delays_a_resync_and_drops_a_periodic_pass() -> None:
    due = s.tick(Schedule(started=START, last_reconcile=START), START + EVERY_S, EVERY_S,
                 busy=False)[0]
    dropped = s.not_synchronized(due, START + EVERY_S, full=False)
    assert not dropped.periodic and not dropped.pending
    delayed = s.not_synchronized(fresh(), START, full=True)
    assert delayed.pending and delayed.next_attempt == START + RESYNC_RETRY_INITIAL_S
    assert s.tick(delayed, START + 0.5, 0.0, busy=False)[1] is ResyncAction.NONE


def test_a_configuration_applied_skips_the_back_off() -> None:
    sched = s.failed(s.succeeded(fresh(), True, 1), START, True, False, WAIT_S)
    sched = s.failed(sched, sched.next_attempt, True, False, WAIT_S)
    assert sched.next_attempt > START + 1
    applied = s.config_applied(sched)
    assert applied.backoff_s == RESYNC_RETRY_INITIAL_S and applied.next_attempt == 0.0
    assert s.tick(applied, START, 0.0, busy=False)[1] is ResyncAction.FULL
    assert not s.nothing_to_do(applied).pending
