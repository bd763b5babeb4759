"""What the server does with one evaluation between the engine's decision and the encoder.

Owns the steps after the engine decided, each acting on the ``Decision`` (nothing here sees a
reply body: ``engine.reply`` encodes the finished decision once): counting the evaluation in the
metrics, running its pod-level node effects on the executor (with a deadline), the rdt_class rule
(a container only gets an ``rdt_class`` whose resctrl group exists), queueing the updates a
policy asks to push, and the warnings that say which of these did not happen. Must not: evaluate,
encode a reply, or name a policy.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from policy_server.bridge_link.pusher import Pusher, PushJob
from policy_server.engine.evaluate import Evaluation, describe
from policy_server.node.execution import ExecutionReport
from policy_server.node.executor import NodeExecutor
from policy_server.sdk.contract_limits import fit_warnings
from policy_server.sdk.decision import Decision
from policy_server.sdk.decision_json import update_to_json
from policy_server.sdk.effects import ResctrlGroup, of_type
from policy_server.telemetry import Metrics

log = logging.getLogger(__name__)

EFFECTS_TIMEOUT_S = 2.0


def without_rdt_class(decision: Decision, groups: Sequence[str]) -> Decision:
    """``decision`` minus an adjusted ``rdt_class`` naming a resctrl group that does not exist."""
    adjust = decision.adjust
    if adjust is None or adjust.resources.rdt_class not in groups:
        return decision
    resources = replace(adjust.resources, rdt_class=None)
    return replace(decision, adjust=replace(adjust, resources=resources))


def with_warnings(decision: Decision, notes: Sequence[str]) -> Decision:
    """``decision`` with ``notes`` after its warnings, cut to the contract's limit (the last kept
    one says how many more were dropped)."""
    return replace(decision, warnings=fit_warnings((*decision.warnings, *notes)))


class RequestSteps:
    """The steps around one evaluation (module docstring), over the server's parts."""

    def __init__(
        self,
        executor: NodeExecutor,
        metrics: Metrics,
        pusher: Pusher | None,
        reason: Callable[[str], str],
    ) -> None:
        self.executor = executor
        self.metrics = metrics
        self.pusher = pusher
        self._reason = reason  # why a node part cannot take effect (service.node_status)
        self._request_metrics: dict[tuple[str, str, str], tuple[Any, Any]] = {}

    async def finish(self, evaluation: Evaluation) -> Evaluation:
        """Count ``evaluation``, run its effects and pushes; the evaluation of the decision the
        reply is encoded from."""
        self.observe(evaluation)
        notes, missing_groups = await self.apply_effects(evaluation)
        decision = evaluation.decision
        if missing_groups:
            decision = without_rdt_class(decision, missing_groups)
        if decision.push:
            notes.extend(self.push(evaluation))
        if notes:
            decision = with_warnings(decision, notes)
        return (
            evaluation
            if decision is evaluation.decision
            else replace(evaluation, decision=decision)
        )

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

    async def apply_effects(self, evaluation: Evaluation) -> tuple[list[str], list[str]]:
        """(warnings for the reply, resctrl groups that do not exist after applying)."""
        effects = evaluation.decision.effects
        if not effects:
            return [], []
        groups = [group.name for group in of_type(effects, ResctrlGroup)]
        if evaluation.event.dry_run:
            notes = self.executor.notes(effects, dry_run=True)
            return notes or ["pod-level effects not applied: dry_run request"], groups
        notes = self.executor.notes(effects)
        context = f"policy={evaluation.policy} {describe(evaluation.event)}"
        try:
            report = await asyncio.wait_for(
                asyncio.to_thread(self.executor.apply, effects, context), EFFECTS_TIMEOUT_S
            )
        except TimeoutError:
            log.error("pod cgroup writes took longer than %ss %s", EFFECTS_TIMEOUT_S, context)
            return [*notes, "pod cgroup writes timed out"], groups
        self._count(report)
        if report.missing_groups:
            notes.append(
                f"rdt_class not set: resctrl group {', '.join(report.missing_groups)} "
                f"could not be created ({self._reason('resctrl')})"
            )
        failed = [f"pod cgroup write failed: {f}" for f in report.failed]
        return notes + failed, report.missing_groups

    def push(self, evaluation: Evaluation) -> list[str]:
        """Queue the evaluation's ``push`` updates; warnings saying why they were not."""
        updates = tuple(
            update_to_json(u) for u in evaluation.decision.push if not u.resources.is_empty()
        )
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
