"""Composition root of the policy server (without the web layer).

Builds the registry (koordinator-qos, the built-in policies enabled with ``--policy`` and
``--policy-module`` policies), the engine, the rules
source, the cgroup executor and the bridge client, and owns what happens around an evaluation:
metrics, pod-level effects, and the recomputation of all known containers after a rule change
(pushed through the bridge). ``app.py`` maps HTTP onto ``PolicyServer.handle``.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bridge.contract.catalogue import API_VERSION, EventName
from policy_server.bridge_client import BridgeControl
from policy_server.cgroups import (
    DEFAULT_CGROUP_ROOT,
    CgroupExecutor,
    CgroupVersion,
    ExecutionReport,
    ExecutorMode,
)
from policy_server.decision import CgroupWrite, Effect
from policy_server.engine import MAX_WARNINGS, Engine, Evaluation, describe
from policy_server.exceptions import BridgeControlError, PayloadError
from policy_server.koordinator import POLICY_NAME, Rules, build_policy, rules_from_yaml
from policy_server.koordinator.rules import stabilize
from policy_server.loader import load_policies
from policy_server.metrics import Metrics
from policy_server.policies import build_builtin
from policy_server.registry import Policy, Registry
from policy_server.rules_watcher import RULES_POLL_INTERVAL_S, ReloadResult, RulesSource, watch

log = logging.getLogger(__name__)

RESYNC_RETRY_MAX_S = 30.0
EFFECTS_TIMEOUT_S = 2.0
# Updates per POST /v1/updates (the bridge takes bodies up to 1 MiB).
PUSH_BATCH = 500


@dataclass(frozen=True, slots=True)
class ServerOptions:
    """Everything configurable from the command line except where to listen."""

    rules_path: Path | None = None
    bridge_control: str | None = None
    policy_modules: tuple[str, ...] = ()
    koordinator: bool = True
    # Built-in policies enabled by name (policy_server.policies), with their config files.
    builtin_policies: tuple[tuple[str, Path | None], ...] = ()
    executor_mode: ExecutorMode = ExecutorMode.OFF
    cgroup_root: Path = DEFAULT_CGROUP_ROOT
    cgroup_version: CgroupVersion = CgroupVersion.AUTO
    rules_poll_interval_s: float = RULES_POLL_INTERVAL_S


@dataclass(slots=True)
class _ResyncState:
    pending: bool = False
    backoff_s: float = 1.0
    next_attempt: float = 0.0
    lock: asyncio.Lock | None = field(default=None)


def _effect_notes(effects: Sequence[Effect], mode: ExecutorMode) -> list[str]:
    """Warnings telling the caller which pod-level effects were not applied."""
    writes = [e for e in effects if isinstance(e, CgroupWrite)]
    if not writes or mode is ExecutorMode.ON:
        return []
    why = "executor off" if mode is ExecutorMode.OFF else "executor in dry-run mode"
    by_parent: dict[str, list[str]] = {}
    for w in writes:
        by_parent.setdefault(w.cgroup_parent, []).append(f"{w.file}={w.value}")
    if len(by_parent) > 3:
        return [f"{len(writes)} pod cgroup writes on {len(by_parent)} pods not applied ({why})"]
    return [
        f"pod cgroup writes not applied ({why}): {parent}: {', '.join(items)}"
        for parent, items in by_parent.items()
    ]


class PolicyServer:
    """The server minus HTTP: see the module docstring."""

    def __init__(
        self,
        options: ServerOptions,
        extra_policies: Sequence[Policy[Any]] = (),
        bridge: BridgeControl | None = None,
    ) -> None:
        self.options = options
        self.metrics = Metrics()
        self.rules: RulesSource[Rules] = RulesSource(
            options.rules_path, rules_from_yaml, Rules(), stabilize
        )
        self.registry = Registry()
        if options.koordinator:
            self.registry.add(build_policy(lambda: self.rules.current))
        for name, config in options.builtin_policies:
            self.registry.add(build_builtin(name, config))
        for policy in [*load_policies(options.policy_modules), *extra_policies]:
            self.registry.add(policy)
        self.engine = Engine(self.registry)
        self.executor = CgroupExecutor(
            options.executor_mode, options.cgroup_root, options.cgroup_version
        )
        if bridge is None and options.bridge_control:
            bridge = BridgeControl(options.bridge_control)
        self.bridge = bridge
        self.resync_policies = (POLICY_NAME,) if options.koordinator else ()
        self._resync = _ResyncState()

    # --- lifecycle -------------------------------------------------------------------------

    def load_rules(self) -> None:
        """Initial rules load; raises ``RulesError`` (the CLI exits with it)."""
        self.rules.load()
        self.metrics.rules_generation.set(self.rules.generation)
        self.metrics.rules_valid.set(1)

    async def run_background(self, stop: asyncio.Event) -> None:
        """Poll the rules file and retry pending resyncs until ``stop`` is set."""
        if self.bridge is not None and self.resync_policies:
            self._resync.pending = True  # catch up with rules that changed while we were down
        if self.options.rules_path is None and self.bridge is None:
            return
        await watch(self.rules, self._on_poll, stop, self.options.rules_poll_interval_s)

    async def aclose(self) -> None:
        if self.bridge is not None:
            await self.bridge.aclose()

    async def _on_poll(self, result: ReloadResult) -> None:
        if result is ReloadResult.INVALID:
            self.metrics.rules_reloads.labels("invalid").inc()
            self.metrics.rules_valid.set(0)
        elif result is ReloadResult.APPLIED:
            self.metrics.rules_reloads.labels("applied").inc()
            self.metrics.rules_valid.set(1)
            self.metrics.rules_generation.set(self.rules.generation)
            self._resync.pending = True
            self._resync.next_attempt = 0.0
            self._resync.backoff_s = 1.0
        if self._resync.pending and time.monotonic() >= self._resync.next_attempt:
            await self.resync()

    # --- evaluation ------------------------------------------------------------------------

    async def handle(self, policy_name: str, body: object) -> Evaluation:
        """Evaluate one request body; raises ``PayloadError`` / ``UnknownPolicyError``."""
        try:
            evaluation = self.engine.evaluate_json(policy_name, body)
        except PayloadError:
            event = body.get("event") if isinstance(body, dict) else None
            self.metrics.requests.labels(policy_name, str(event), "invalid").inc()
            raise
        self._observe(evaluation)
        notes = await self._apply_effects(evaluation)
        if notes:
            evaluation = _with_warnings(evaluation, notes)
        return evaluation

    def _observe(self, evaluation: Evaluation) -> None:
        m, name, event = self.metrics, evaluation.policy, evaluation.event.name.value
        outcome = "rejected" if evaluation.decision.reject is not None else "ok"
        m.requests.labels(name, event, outcome).inc()
        m.decision_seconds.labels(name, event).observe(evaluation.duration_s)
        for handler in evaluation.failed_handlers:
            m.handler_failures.labels(name, handler).inc()
        if evaluation.conflicts:
            m.conflicts.labels(name).inc(len(evaluation.conflicts))

    async def _apply_effects(self, evaluation: Evaluation) -> list[str]:
        effects = evaluation.decision.effects
        if not effects:
            return []
        if evaluation.event.dry_run:
            return ["pod-level effects not applied: dry_run request"]
        notes = _effect_notes(effects, self.executor.mode)
        if self.executor.mode is ExecutorMode.OFF:
            return notes
        context = f"policy={evaluation.policy} {describe(evaluation.event)}"
        try:
            report = await asyncio.wait_for(
                asyncio.to_thread(self.executor.apply, effects, context), EFFECTS_TIMEOUT_S
            )
        except TimeoutError:
            log.error("pod cgroup writes took longer than %ss %s", EFFECTS_TIMEOUT_S, context)
            return [*notes, "pod cgroup writes timed out"]
        self._count(report)
        return notes + [f"pod cgroup write failed: {f}" for f in report.failed]

    def _count(self, report: ExecutionReport) -> None:
        for result in ("written", "logged", "skipped", "failed"):
            count = len(getattr(report, result))
            if count:
                self.metrics.cgroup_writes.labels(result).inc(count)

    # --- rule changes ----------------------------------------------------------------------

    async def resync(self) -> bool:
        """Recompute every known container with the current rules and push what changed.

        Returns False (and schedules a retry with back-off) if the bridge could not be used.
        """
        state = self._resync
        if self.bridge is None or not self.resync_policies:
            state.pending = False
            return True
        if state.lock is None:
            state.lock = asyncio.Lock()
        async with state.lock:
            try:
                await self._resync_once(self.bridge)
            except (BridgeControlError, PayloadError) as exc:
                self.metrics.resyncs.labels("failed").inc()
                log.error(
                    "resync after rule change failed, retrying in %.0fs: %s", state.backoff_s, exc
                )
                state.pending = True
                state.next_attempt = time.monotonic() + state.backoff_s
                state.backoff_s = min(state.backoff_s * 2, RESYNC_RETRY_MAX_S)
                return False
        self.metrics.resyncs.labels("ok").inc()
        state.pending = False
        state.backoff_s = 1.0
        return True

    async def _resync_once(self, bridge: BridgeControl) -> None:
        snapshot = await bridge.state()
        body = {
            "api_version": API_VERSION,
            "uid": f"resync-{uuid.uuid4()}",
            "event": EventName.SYNCHRONIZE.value,
            "runtime": {"name": "nri-policy-server", "version": "resync"},
            "budget_ms": 0,
            "dry_run": False,
            "pods": snapshot.pods,
            "containers": snapshot.containers,
        }
        for name in self.resync_policies:
            evaluation = self.engine.evaluate_json(name, body)
            self._observe(evaluation)
            await self._apply_effects(evaluation)
            updates = evaluation.reply.get("update", [])
            for warning in evaluation.reply.get("warnings", []):
                log.warning("resync policy=%s: %s", name, warning)
            if not updates:
                log.info(
                    "resync policy=%s: no container needs a change (%d containers)",
                    name,
                    len(snapshot.containers),
                )
                continue
            failed = []
            for start in range(0, len(updates), PUSH_BATCH):
                batch = updates[start : start + PUSH_BATCH]
                failed.extend(await bridge.push_updates(batch))
                self.metrics.pushed_updates.inc(len(batch))
            log.info(
                "resync policy=%s: pushed %d updates, %d failed", name, len(updates), len(failed)
            )
            for item in failed:
                log.warning("resync policy=%s: bridge reports failed update %r", name, item)


def _with_warnings(evaluation: Evaluation, notes: list[str]) -> Evaluation:
    reply = dict(evaluation.reply)
    warnings = [*reply.get("warnings", []), *notes][:MAX_WARNINGS]
    reply["warnings"] = warnings
    return replace(evaluation, reply=reply)
