"""The resync and the reconciler's passes, driven by ``service.resync_schedule``.

Owns the loop around the pure schedule: each poll tick (``Resync.on_poll``) feeds it the time and
what happened, and runs the pass it asks for, one at a time; ``Resync.run_pass`` talks to the
bridge and tells the schedule how it went, with the metrics and log lines (the waits of the
expected start-up order said once at INFO). A full pass recomputes every known container: every
policy that handles Synchronize gets a synthetic one built from the bridge's state (fetched while
no event reached us), and what changed is pushed through the bridge; a policy with a reconcile
hook is evaluated by the node reconciler's pass instead (cgroup files read back), which also runs
on its own every ``--reconcile-interval`` seconds. An entry of the bridge's state the request
decoder refuses is left out of the pass, logged and counted
(``policy_reconcile_container_failures_total{pass="resync"}``); the others are resynced. Must
not: decide when (the schedule does), evaluate a request, or name a policy.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import replace

from policy_server.bridge_link.control_client import BridgeControl, BridgeState
from policy_server.bridge_link.pusher import PushJob
from policy_server.engine.evaluate import Engine
from policy_server.engine.request import node_synchronize
from policy_server.exceptions import BridgeControlError, BridgeUnreachableError, PayloadError
from policy_server.node.reconciler import NodeReconciler, PassReport
from policy_server.sdk.extension import ReloadResult
from policy_server.service import resync_schedule as schedule
from policy_server.service.options import ServerOptions
from policy_server.service.resync_schedule import RESYNC_RETRY_INITIAL_S, ResyncAction, Schedule
from policy_server.service.settle import Settle

log = logging.getLogger(__name__)

# Snapshots taken while events kept arriving are fetched again this often before backing off.
RESYNC_SNAPSHOT_ATTEMPTS = 3


class Resync:
    """Recomputes every known container when the schedule says so (module docstring)."""

    def __init__(
        self,
        options: ServerOptions,
        bridge: BridgeControl | None,
        engine: Engine,
        settle: Settle,
        reconciler: NodeReconciler | None,
        policies: Sequence[str],
        reconciled: frozenset[str],
    ) -> None:
        self.options = options
        self.bridge = bridge
        self.engine = engine
        self.settle = settle
        self.reconciler = reconciler
        self.policies = tuple(policies)  # those that handle Synchronize
        self._reconciled = reconciled  # evaluated by the reconciler's pass, not the resync's
        now = time.monotonic()
        # The start-up pass is the catch-up one (the first tick); the periodic ones follow.
        self.schedule = Schedule(started=now, last_reconcile=now)
        self._lock = asyncio.Lock()
        self._waiting = False  # the start-up wait for the socket was said (INFO, once)
        self._unsynchronized = False  # "the bridge has not synchronized yet" was said (once)

    def start(self) -> None:
        """Start-up: the clock for ``--bridge-start-wait`` starts, and with a bridge a full
        resync is owed (until it ran, a stateful policy works from an empty node view)."""
        self.schedule = replace(self.schedule, started=time.monotonic())
        if self.bridge is not None and self.policies:
            self.schedule = schedule.requested(self.schedule)

    async def on_poll(self, result: ReloadResult) -> None:
        """One tick: a configuration's poll result, then the pass the schedule asks for."""
        metrics = self.settle.metrics
        if result is ReloadResult.INVALID:
            metrics.rules_reloads.labels("invalid").inc()
            metrics.rules_valid.set(0)
        elif result is ReloadResult.APPLIED:
            metrics.rules_reloads.labels("applied").inc()
            metrics.rules_valid.set(1)
            self.schedule = schedule.config_applied(self.schedule)
        every_s = self.options.reconcile_interval_s if self.reconciler is not None else 0.0
        self.schedule, action = schedule.tick(
            self.schedule, time.monotonic(), every_s, self._lock.locked()
        )
        if action is ResyncAction.FULL:
            await self.run_pass()
        elif action is ResyncAction.PERIODIC:
            await self.run_pass(full=False)

    async def run_pass(self, full: bool = True) -> bool:
        """Recompute every known container (current rules, current state) and push what changed;
        the reconciled policies' part is a full node-reconciler pass (pod-level values, drift).
        ``full=False``: the reconciler's pass only.

        Returns False (and the schedule retries) if the bridge could not be used.
        """
        if self.bridge is None or not self.policies:
            self.schedule = schedule.nothing_to_do(self.schedule)
            return True
        requests = self.schedule.requests
        started = time.time()
        async with self._lock:
            try:
                if not await self.bridge.ready():
                    self._not_synchronized(full)
                    return False
                if full:
                    await self._resync_once(self.bridge)
                else:
                    await self._reconcile_once()
            except Exception as exc:  # bridge down, bad state, a host surprise: retry later
                self._failed(exc, full)
                self._failed_before_reconcile(exc, started)
                return False
        self.settle.metrics.resyncs.labels("ok").inc()
        if not self.schedule.bridge_answered:
            log.info("the bridge's control API at %s answered; resynced", self.bridge.url)
        self.schedule = schedule.succeeded(self.schedule, full, requests)
        return True

    def _not_synchronized(self, full: bool) -> None:
        """The bridge is up but not synchronized with the runtime (not connected yet, or
        answering the Synchronize now): its state is empty or about to change, and a pass now
        would compete with the Synchronize for the CPU."""
        self.schedule = schedule.not_synchronized(self.schedule, time.monotonic(), full)
        self.settle.metrics.resyncs.labels("waiting").inc()
        url = self.bridge.url if self.bridge is not None else "?"
        if not self._unsynchronized:
            self._unsynchronized = True
            log.info(
                "the bridge at %s has not synchronized with the runtime yet; the resync "
                "and the reconciler wait for it",
                url,
            )
        else:
            log.debug("the bridge at %s has not synchronized with the runtime yet", url)

    def _failed(self, exc: Exception, full: bool) -> None:
        before, now = self.schedule, time.monotonic()
        unreachable = isinstance(exc, BridgeUnreachableError)
        wait_s = self.options.bridge_start_wait_s
        self.schedule = schedule.failed(before, now, full, unreachable, wait_s)
        url = self.bridge.url if self.bridge is not None else "?"
        if schedule.bridge_not_up_yet(before, now, unreachable, wait_s):
            self.settle.metrics.resyncs.labels("waiting").inc()
            if not self._waiting:
                self._waiting = True
                log.info(
                    "waiting for the bridge's control socket at %s (not up yet); retrying "
                    "every %.0fs, an error after %.0fs",
                    url,
                    RESYNC_RETRY_INITIAL_S,
                    wait_s,
                )
            else:
                log.debug("still waiting for the bridge's control socket at %s: %s", url, exc)
            return
        if not isinstance(exc, BridgeControlError | PayloadError):
            log.exception("reconcile pass failed unexpectedly")
        self.settle.metrics.resyncs.labels("failed").inc()
        log.error(
            "resync failed, retrying in %.0fs: %s%s",
            before.backoff_s,
            exc,
            self._unreachable_why(exc),
        )

    def _failed_before_reconcile(self, exc: Exception, started: float) -> None:
        """A pass that failed before the reconciler's part ran is the reconciler's last pass
        too (``GET /v1/state`` shows its error, not an older pass that went well)."""
        if self.reconciler is None:
            return
        last = self.reconciler.last
        if last is None or last.finished < started:
            self.reconciler.last = PassReport(error=f"{type(exc).__name__}: {exc}",
                                              finished=time.time())

    def _unreachable_why(self, exc: Exception) -> str:
        """What an unreachable control socket means now, for the error line."""
        if not isinstance(exc, BridgeUnreachableError):
            return ""
        if self.schedule.bridge_answered:
            return " (the bridge's control socket worked before: is the bridge still running?)"
        return (
            f" (no bridge control socket {self.options.bridge_start_wait_s:.0f}s after "
            "start-up: is the bridge running, with this control socket?)"
        )

    async def _snapshot(self, bridge: BridgeControl) -> BridgeState:
        """The bridge's state, fetched while no event reached us (else the policies' state
        would be rebuilt from a view older than what they have already seen)."""
        for _ in range(RESYNC_SNAPSHOT_ATTEMPTS):
            seen = self.engine.evaluations
            snapshot = await bridge.state()
            if self.engine.evaluations == seen:
                return snapshot
        raise BridgeControlError(
            f"events kept arriving during {RESYNC_SNAPSHOT_ATTEMPTS} state fetches"
        )

    async def _resync_once(self, bridge: BridgeControl) -> None:
        snapshot = await self._snapshot(bridge)
        sync = node_synchronize("resync", snapshot.pods, snapshot.containers, snapshot.raw)
        for skipped in sync.skipped:
            log.warning("resync: skipped %s", skipped.text())
            self.settle.metrics.container_failures.labels("resync", "refused").inc()
        event = sync.event
        names = [n for n in self.policies if n not in self._reconciled]
        # Every policy first, with no await in between: their state is rebuilt from one view.
        evaluations = [self.engine.evaluate(name, event) for name in names]
        pusher = self.settle.pusher
        assert pusher is not None  # there is a bridge
        for evaluation in evaluations:
            settled = await self.settle.own_applied(evaluation)
            updates = settled.pushes
            log.info(
                "resync policy=%s: %d of %d containers need an update",
                settled.policy,
                len(updates),
                len(sync.containers),
            )
            if updates:
                pusher.submit(PushJob(settled.policy, "resync", updates))
        await pusher.join()
        await self._reconcile_once(snapshot)

    async def _reconcile_once(self, snapshot: BridgeState | None = None) -> None:
        if self.reconciler is None:
            return
        report = await self.reconciler.run(snapshot)
        for error in report.errors[:20]:
            log.warning("reconcile: %s", error)
