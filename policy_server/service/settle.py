"""The one settle step: an evaluation's merged ``Decision`` -> the reply, the node effects and
the pushes (``engine.settled.Settled``), for the HTTP route, the resync, the node reconciler and
the test kit alike.

Owns what happens between the engine's decision and the encoder, each part acting on the decision
once: counting the evaluation in the metrics, running its pod-level node effects on the executor
(with a deadline; an executor that applies nothing says so in warnings, without awaiting), the
rdt_class rule (a container only gets an ``rdt_class`` whose resctrl group exists), handing the
updates a policy pushes to the push outlet (the server's ``Pusher``; the test kit's recorder),
and the warnings that say which of these did not happen. ``reply`` is a webhook request's
(``reply_now`` the same without awaiting, for an executor that applies nothing: the test kit);
``own`` the server's own Synchronize (the resync, the reconciler), whose updates are pushes and
whose warnings are logged. Nothing here sees a reply body: ``engine.reply`` encodes the settled
decision once. Must not: evaluate, encode a reply, or name a policy.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from policy_server.bridge_link.pusher import PushJob
from policy_server.engine.evaluate import Evaluation, describe
from policy_server.engine.settled import Settled, pushes_of
from policy_server.node.execution import ExecutionReport, ExecutorMode
from policy_server.node.executor import NodeExecutor
from policy_server.sdk.decision import Decision, amended
from policy_server.sdk.effects import ResctrlGroup, of_type
from policy_server.telemetry import Metrics

log = logging.getLogger(__name__)

EFFECTS_TIMEOUT_S = 2.0


class PushOutlet(Protocol):
    """Where pushed updates go (``bridge_link.pusher.Pusher``; the test kit's recorder)."""

    def submit(self, job: PushJob) -> bool:
        """Take ``job`` without waiting; False if it cannot."""

    async def join(self) -> None:
        """Wait until everything taken so far has been delivered (or given up)."""


@dataclass(frozen=True, slots=True)
class EffectsDone:
    """What running a decision's effects said: warnings, resctrl groups that do not exist."""

    notes: tuple[str, ...] = ()
    missing_groups: tuple[str, ...] = ()


NOTHING_DONE = EffectsDone()


def without_rdt_class(decision: Decision, groups: Sequence[str]) -> Decision:
    """``decision`` minus an adjusted ``rdt_class`` naming a resctrl group that does not exist."""
    adjust = decision.adjust
    if adjust is None or adjust.resources.rdt_class not in groups:
        return decision
    resources = amended(adjust.resources, rdt_class=None)
    return amended(decision, adjust=amended(adjust, resources=resources))


class Settle:
    """The settle step (module docstring), over the server's parts."""

    def __init__(
        self,
        executor: NodeExecutor,
        metrics: Metrics,
        pusher: PushOutlet | None,
        reason: Callable[[str], str],
    ) -> None:
        self.executor = executor
        self.metrics = metrics
        self.pusher = pusher
        self._reason = reason  # why a node part cannot take effect (service.node_status)
        self._request_metrics: dict[tuple[str, str, str], tuple[Any, Any]] = {}

    # --- the four callers --------------------------------------------------------------------

    async def reply(self, evaluation: Evaluation) -> Settled:
        """A webhook request's evaluation settled: counted, effects run, pushes handed on."""
        self.observe(evaluation)
        done = self._unapplied(evaluation)
        if done is None:
            done = await self._apply(evaluation)
        return self._replied(evaluation, done)

    def reply_now(self, evaluation: Evaluation) -> Settled:
        """``reply`` without awaiting, for an executor not in mode ``on`` (its apply writes
        nothing): the test kit's, so its reply is the server's by construction."""
        if self.executor.mode is ExecutorMode.ON:
            raise RuntimeError("an executor in mode on writes to the node: await reply()")
        self.observe(evaluation)
        done = self._unapplied(evaluation)
        if done is None:
            done = self._done(evaluation, self.executor.apply(
                evaluation.decision.effects, self._context(evaluation)))
        return self._replied(evaluation, done)

    def own(self, evaluation: Evaluation, source: str) -> Settled:
        """The server's own Synchronize settled (``source``: the node reconciler's, which keeps
        the effects in its own pass): counted, every update a push, the warnings logged."""
        self.observe(evaluation)
        settled = Settled(evaluation, evaluation.decision, evaluation.notes,
                          pushes_of(evaluation.decision, replied=False), replied=False)
        self._log(settled, source)
        return settled

    async def own_applied(self, evaluation: Evaluation) -> Settled:
        """``own`` with the effects run as a request's are (the resync's)."""
        self.observe(evaluation)
        done = self._unapplied(evaluation)
        if done is None:
            done = await self._apply(evaluation)
        settled = Settled(evaluation, evaluation.decision, (*evaluation.notes, *done.notes),
                          pushes_of(evaluation.decision, replied=False), replied=False)
        self._log(settled, "resync")
        return settled

    # --- the parts -----------------------------------------------------------------------

    def _replied(self, evaluation: Evaluation, done: EffectsDone) -> Settled:
        decision = evaluation.decision
        if done.missing_groups:
            decision = without_rdt_class(decision, done.missing_groups)
        pushes = pushes_of(decision, replied=True)
        notes = (*evaluation.notes, *done.notes, *self._push(evaluation, pushes))
        return Settled(evaluation, decision, notes, pushes)

    def _log(self, settled: Settled, source: str) -> None:
        for warning in settled.warnings:
            log.warning("%s policy=%s: %s", source, settled.policy, warning)

    def observe(self, evaluation: Evaluation) -> None:
        """Count one evaluation (requests, decision time, handler failures, conflicts)."""
        m, name, event = self.metrics, evaluation.policy, evaluation.event.name.value
        outcome = "rejected" if evaluation.decision.reject is not None else "ok"
        key = (name, event, outcome)
        children = self._request_metrics.get(key)
        if children is None:  # labels() takes a lock and builds a key: once per combination
            children = self._request_metrics[key] = (
                m.requests.labels(name, event, outcome),
                m.decision_seconds.labels(name, event),
            )
        children[0].inc()
        children[1].observe(evaluation.duration_s)
        for handler in evaluation.failed_handlers:
            m.handler_failures.labels(name, handler).inc()
        if evaluation.conflicts:
            m.conflicts.labels(name).inc(len(evaluation.conflicts))

    def _unapplied(self, evaluation: Evaluation) -> EffectsDone | None:
        """What the effects come to when none are applied (none asked for, a dry-run request);
        None when the executor must apply them (``_apply``)."""
        effects = evaluation.decision.effects
        if not effects:
            return NOTHING_DONE
        if evaluation.event.dry_run:
            groups = tuple(group.name for group in of_type(effects, ResctrlGroup))
            notes = self.executor.notes(effects, dry_run=True)
            return EffectsDone(
                tuple(notes or ["pod-level effects not applied: dry_run request"]), groups)
        return None

    @staticmethod
    def _context(evaluation: Evaluation) -> str:
        return f"policy={evaluation.policy} {describe(evaluation.event)}"

    async def _apply(self, evaluation: Evaluation) -> EffectsDone:
        """Run the effects on the executor in a worker thread, under ``EFFECTS_TIMEOUT_S``."""
        effects, context = evaluation.decision.effects, self._context(evaluation)
        try:
            report = await asyncio.wait_for(
                asyncio.to_thread(self.executor.apply, effects, context), EFFECTS_TIMEOUT_S
            )
        except TimeoutError:
            log.error("pod cgroup writes took longer than %ss %s", EFFECTS_TIMEOUT_S, context)
            groups = tuple(group.name for group in of_type(effects, ResctrlGroup))
            notes = self.executor.notes(effects)
            return EffectsDone((*notes, "pod cgroup writes timed out"), groups)
        return self._done(evaluation, report)

    def _done(self, evaluation: Evaluation, report: ExecutionReport) -> EffectsDone:
        """What the executor's report comes to: counted, and the warnings for the reply."""
        self._count(report)
        notes = self.executor.notes(evaluation.decision.effects)
        if report.missing_groups:
            notes.append(
                f"rdt_class not set: resctrl group {', '.join(report.missing_groups)} "
                f"could not be created ({self._reason('resctrl')})"
            )
        failed = [f"pod cgroup write failed: {f}" for f in report.failed]
        return EffectsDone((*notes, *failed), tuple(report.missing_groups))

    def _push(self, evaluation: Evaluation, updates: tuple[dict[str, Any], ...]) -> list[str]:
        """Hand ``updates`` to the outlet; warnings saying why they were not."""
        if not updates:
            return []
        if evaluation.event.dry_run:
            return [f"{len(updates)} pushed updates not sent: dry_run request"]
        if self.pusher is None:
            return [f"{len(updates)} pushed updates not sent: no --bridge-control"]
        job = PushJob(evaluation.policy, describe(evaluation.event), updates)
        if not self.pusher.submit(job):
            return [f"{len(updates)} pushed updates dropped: push queue full"]
        return []

    def _count(self, report: ExecutionReport) -> None:
        for result in ("written", "logged", "skipped", "failed"):
            count = len(getattr(report, result))
            if count:
                self.metrics.cgroup_writes.labels(result).inc(count)
