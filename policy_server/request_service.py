"""Composition root of the policy server (without the web layer).

Builds the registry (the built-in policies: koordinator-qos by default and those enabled with
``--policy``, then ``--policy-module`` policies), the engine, the node-effect executor, the
bridge client and the node reconciler, runs the policies' background tasks (``policy_host``:
the SDK's extension points seen from the server), and owns what happens around an evaluation:
metrics, pod-level effects (a container only gets an ``rdt_class`` whose resctrl group exists),
updates a policy asks to push, and the recomputation of all known containers (pushed through
the bridge) at startup and after a configuration change: every policy that handles Synchronize
gets a synthetic one built from the bridge's state, so a restarted server rebuilds its node
view and its policies' state; a policy with a reconcile hook (koordinator-qos) is evaluated by
the node reconciler's pass instead, which also runs every ``--reconcile-interval`` seconds. A
bridge whose control socket is not there yet at start-up is waited for quietly (the shipped
units start this server first), for up to ``--bridge-start-wait`` seconds; so is a bridge not
yet synchronized with the runtime (its state is empty, or the Synchronize it is answering). It
says once, at start-up and in ``node_state`` (``GET /v1/state``), which node effects cannot take
effect here and why. ``server.hot_route`` maps HTTP onto ``PolicyServer.handle``; every
``Event`` it, the resync and the reconciler evaluate comes from ``engine.request``. Must not:
name a policy (the catalogue, ``policy_server.policies``, says which built-ins are served) or
import one.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bridge.contract.catalogue import EventName
from policy_server import policy_host
from policy_server.bridge_link.control_client import BridgeControl, BridgeState
from policy_server.bridge_link.pusher import Pusher, PushJob
from policy_server.engine.evaluate import MAX_WARNINGS, Engine, Evaluation, describe
from policy_server.engine.loader import load_policies
from policy_server.engine.reply import updates_to_json
from policy_server.engine.request import synchronize_event
from policy_server.exceptions import (
    BridgeControlError,
    BridgeUnreachableError,
    PayloadError,
    RequestError,
)
from policy_server.node import probe as node_state
from policy_server.node.cgroups import (
    DEFAULT_CGROUP_ROOT,
    CgroupExecutor,
    CgroupVersion,
    ExecutionReport,
    ExecutorMode,
)
from policy_server.node.cpu_weight import CpuWeights, WeightSetting
from policy_server.node.procfs import DEFAULT_PROC_ROOT, Procfs
from policy_server.node.reconciler import DEFAULT_RECONCILE_INTERVAL_S, NodeReconciler
from policy_server.node.resctrl_fs import DEFAULT_RESCTRL_ROOT, ResctrlFS
from policy_server.node.systemd_bus import SystemdBus
from policy_server.node.unit_properties import DEFAULT_SYSTEM_BUS, PropertiesMode, SystemdUnits
from policy_server.policies import build_builtin, enabled_builtins
from policy_server.sdk.decision import CgroupWrite, Effect, HostDirectory, ResctrlGroup
from policy_server.sdk.decision_json import update_to_json
from policy_server.sdk.extension import ConfigStatus, ReloadResult
from policy_server.sdk.model import Event
from policy_server.sdk.registry import Policy, Registry
from policy_server.telemetry import Metrics

log = logging.getLogger(__name__)

# How often the server looks at pending resyncs and the reconciler's schedule, and how often
# policies' background tasks poll their configuration (--rules-poll-interval).
POLL_INTERVAL_S = 1.0
RESYNC_RETRY_MAX_S = 30.0
RESYNC_RETRY_INITIAL_S = 1.0
# The shipped systemd units and the DaemonSet start the policy server before the bridge, so for a
# while after start-up the bridge's control socket does not exist yet (or refuses connections).
# Within this many seconds of start-up that is the expected order: said once at INFO, retried
# every RESYNC_RETRY_INITIAL_S. Later (the bridge is stuck or misconfigured), or once the bridge
# has answered (its socket vanished), it is an ERROR. `--bridge-start-wait` (docs/operations.md).
BRIDGE_START_WAIT_S = 60.0
EFFECTS_TIMEOUT_S = 2.0
# Snapshots taken while events kept arriving are fetched again this often before backing off.
RESYNC_SNAPSHOT_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class ServerOptions:
    """Everything configurable from the command line except where to listen."""

    # The default built-in's configuration (--rules, an alias: policies.enabled_builtins).
    rules_path: Path | None = None
    bridge_control: str | None = None
    policy_modules: tuple[str, ...] = ()
    # Serve the catalogue's DEFAULT_POLICY even if --policy does not name it (--no-koordinator).
    default_policies: bool = True
    # Built-in policies enabled by name (policy_server.policies), with their config files.
    builtin_policies: tuple[tuple[str, Path | None], ...] = ()
    executor_mode: ExecutorMode = ExecutorMode.OFF
    cgroup_root: Path = DEFAULT_CGROUP_ROOT
    cgroup_version: CgroupVersion = CgroupVersion.AUTO
    cpu_weight_formula: WeightSetting = WeightSetting.AUTO
    # Off unless asked for (the CLI's default is auto): a test's cgroup tree is no systemd's.
    systemd_properties: PropertiesMode = PropertiesMode.OFF
    system_bus: str = DEFAULT_SYSTEM_BUS
    rules_poll_interval_s: float = POLL_INTERVAL_S
    reconcile_interval_s: float = DEFAULT_RECONCILE_INTERVAL_S
    bridge_start_wait_s: float = BRIDGE_START_WAIT_S
    resctrl_root: Path = DEFAULT_RESCTRL_ROOT
    proc_root: Path = DEFAULT_PROC_ROOT


@dataclass(slots=True)
class _ResyncState:
    pending: bool = False  # a full resync (every policy handling Synchronize)
    requests: int = 0  # full resyncs asked for so far (one asked during a pass stays pending)
    periodic: bool = False  # the node reconciler's periodic pass
    backoff_s: float = RESYNC_RETRY_INITIAL_S
    next_attempt: float = 0.0
    lock: asyncio.Lock | None = field(default=None)
    started: float = field(default_factory=time.monotonic)  # run_background sets it again
    bridge_answered: bool = False  # the control socket has accepted a connection once
    waiting: bool = False  # the start-up wait was announced (INFO, once)
    unsynchronized: bool = False  # "the bridge has not synchronized yet" was said (INFO, once)


def _effect_notes(
    effects: Sequence[Effect], mode: ExecutorMode, dry_run: bool = False
) -> list[str]:
    """Warnings telling the caller which node effects were not applied (a dry-run request, or
    a report-only executor mode)."""
    if dry_run:
        why = "dry_run request"
    elif mode is ExecutorMode.ON:
        return []
    else:
        why = "executor off" if mode is ExecutorMode.OFF else "executor in dry-run mode"
    notes = [
        f"host directory {e.path} not created ({why}); the mount that needs it will fail"
        for e in effects
        if isinstance(e, HostDirectory)
    ]
    writes = [e for e in effects if isinstance(e, CgroupWrite)]
    if not writes:
        return notes
    by_parent: dict[str, list[str]] = {}
    for w in writes:
        by_parent.setdefault(w.cgroup_parent, []).append(f"{w.file}={w.value}")
    if len(by_parent) > 3:
        return [
            *notes,
            f"{len(writes)} pod cgroup writes on {len(by_parent)} pods not applied ({why})",
        ]
    return notes + [
        f"pod cgroup writes not applied ({why}): {parent}: {', '.join(items)}"
        for parent, items in by_parent.items()
    ]


def _without_rdt_class(reply: dict[str, Any], groups: Sequence[str]) -> dict[str, Any]:
    """The reply minus an ``rdt_class`` naming a resctrl group that does not exist."""
    resources = reply.get("adjust", {}).get("linux", {}).get("resources", {})
    if resources.get("rdt_class") not in groups:
        return reply
    adjust = dict(reply["adjust"])
    linux = dict(adjust["linux"])
    linux["resources"] = {k: v for k, v in resources.items() if k != "rdt_class"}
    if not linux["resources"]:
        del linux["resources"]
    adjust["linux"] = linux
    if not linux:
        del adjust["linux"]
    out = {k: v for k, v in reply.items() if k != "adjust"}
    if adjust:
        out["adjust"] = adjust
    return out


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
        self.executor = CgroupExecutor(
            options.executor_mode,
            options.cgroup_root,
            options.cgroup_version,
            ResctrlFS(options.resctrl_root, options.proc_root / "cpuinfo"),
            CpuWeights(options.cpu_weight_formula),
            SystemdUnits(
                options.systemd_properties,
                SystemdBus(options.system_bus),
                observe=lambda result: self.metrics.unit_properties.labels(result).inc(),
            ),
        )
        # Found out once: every policy sees them (node.facts; built-ins also at build time).
        self.facts = node_state.node_facts(self.executor)
        self.registry = Registry()
        builtins = enabled_builtins(
            options.builtin_policies, options.rules_path, options.default_policies
        )
        for name, config in builtins:  # a bad configuration raises here, before listening
            self.registry.add(build_builtin(name, config, self.facts))
        for policy in [*load_policies(options.policy_modules), *extra_policies]:
            self.registry.add(policy)
        self.engine = Engine(self.registry, self.facts)
        self.metrics.export_policy_counters(lambda: (
            (p.name, sample) for p in self.registry if p.extensions.counters is not None
            for sample in p.extensions.counters()))
        if bridge is None and options.bridge_control:
            bridge = BridgeControl(options.bridge_control)
        self.bridge = bridge
        self.pusher = Pusher(bridge, self.metrics) if bridge is not None else None
        self.resync_policies = tuple(
            p.name for p in self.registry if EventName.SYNCHRONIZE in p.events
        )
        self._resync = _ResyncState()
        self.procfs = Procfs(options.proc_root)
        self.reconciler: NodeReconciler | None = None
        plans = policy_host.reconcile_hooks(self.registry)
        if bridge is not None and plans:
            self.reconciler = NodeReconciler(
                engine=self.engine,
                executor=self.executor,
                bridge=bridge,
                metrics=self.metrics,
                plans=plans,
                observe=self._observe,
                procfs=self.procfs,
            )
        # Evaluated by the reconciler's pass (with the cgroup files read back), not the resync's.
        self._reconciled = frozenset(plans) if self.reconciler is not None else frozenset()
        self._stop: asyncio.Event | None = None
        self._config_metrics()
        self._node_state: dict[str, Any] = {}
        self._request_metrics: dict[tuple[str, str, str], tuple[Any, Any]] = {}
        # The start-up pass is the catch-up one (run_background); the periodic ones follow.
        self._last_reconcile = time.monotonic()

    # --- lifecycle -------------------------------------------------------------------------

    def _config_metrics(self) -> None:
        """The configuration metrics after the initial loads (done when building: a policy
        whose configuration does not load stops the server, so what is served is valid, also
        when no policy has a configuration to report, as with --no-koordinator)."""
        status = policy_host.config_status(self.registry)
        if status is not None:
            self.metrics.rules_generation.set(status.generation)
        self.metrics.rules_valid.set(1)

    def probe_node(self) -> dict[str, Any]:
        """Find out once what can take effect on this node; log what cannot, once."""
        self._node_state = node_state.probe_node(
            self.executor,
            self.reconciler,
            self.procfs,
            self.options.reconcile_interval_s,
            policy_host.node_needs(self.registry),
            self.facts,
        )
        return self._node_state

    def node_state(self) -> dict[str, Any]:
        """The node-effect status for ``GET /v1/state`` (probed at start-up)."""
        if not self._node_state:
            self.probe_node()
        return node_state.describe(self._node_state, self.executor, self.reconciler)

    async def run_background(self, stop: asyncio.Event) -> None:
        """Run the policies' background tasks, and retry pending resyncs and start the
        reconciler's passes, until ``stop`` is set."""
        self._stop = stop
        self._resync.started = time.monotonic()
        if self.bridge is not None and self.resync_policies:
            # Catch up with what happened while we were down (rules, containers) right away:
            # until then a stateful policy works from an empty node view.
            self._request_resync()
            await self._on_poll(ReloadResult.UNCHANGED)
        async with asyncio.TaskGroup() as tasks:
            for policy in self.registry:
                task = policy.extensions.background
                if task is not None:
                    host = policy_host.Host(self, policy.name)
                    tasks.create_task(policy_host.guarded(policy.name, task(host)),
                                      name=policy.name)
            if self.bridge is not None:
                tasks.create_task(self._ticks(), name="resync-ticks")

    @property
    def poll_interval_s(self) -> float:
        """How often background tasks poll (``PolicyHost.poll_interval_s``)."""
        return self.options.rules_poll_interval_s

    async def stopped(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the stop; True once stopping (``PolicyHost.stopped``)."""
        stop = self._stop
        if stop is None:  # not running: nothing will ever stop
            await asyncio.sleep(timeout_s)
            return False
        try:
            await asyncio.wait_for(stop.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    async def _ticks(self) -> None:
        while not await self.stopped(self.options.rules_poll_interval_s):
            try:
                await self._on_poll(ReloadResult.UNCHANGED)
            except Exception:  # a task boundary: one bad tick must not end the others
                log.exception("resync tick failed")

    async def config_polled(self, result: ReloadResult, status: ConfigStatus) -> None:
        """A policy's configuration was looked at (``PolicyHost.config_polled``)."""
        if result is ReloadResult.APPLIED:
            self.metrics.rules_generation.set(status.generation)
        await self._on_poll(result)

    async def aclose(self) -> None:
        if self.pusher is not None:
            await self.pusher.aclose()
        if self.bridge is not None:
            await self.bridge.aclose()

    def _reconcile_due(self) -> None:
        """Start a pass every ``reconcile_interval_s`` (rides on the rules poll tick)."""
        if self.reconciler is None or self.options.reconcile_interval_s <= 0:
            return
        now = time.monotonic()
        if now - self._last_reconcile >= self.options.reconcile_interval_s:
            self._last_reconcile = now
            self._resync.periodic = True

    def _request_resync(self) -> None:
        self._resync.pending = True
        self._resync.requests += 1

    async def _on_poll(self, result: ReloadResult) -> None:
        """One tick: a configuration's poll result, then a due resync or reconciler pass."""
        self._reconcile_due()
        if result is ReloadResult.INVALID:
            self.metrics.rules_reloads.labels("invalid").inc()
            self.metrics.rules_valid.set(0)
        elif result is ReloadResult.APPLIED:
            self.metrics.rules_reloads.labels("applied").inc()
            self.metrics.rules_valid.set(1)
            self._request_resync()
            self._resync.next_attempt = 0.0
            self._resync.backoff_s = RESYNC_RETRY_INITIAL_S
        if self._resync.lock is not None and self._resync.lock.locked():
            return  # a pass is running (another task's tick); what is pending waits for the next
        if time.monotonic() >= self._resync.next_attempt:
            if self._resync.pending:
                await self.resync()
            elif self._resync.periodic:
                await self.resync(full=False)  # the reconciler's periodic pass only

    # --- evaluation ------------------------------------------------------------------------

    def refused(self, policy_name: str, error: RequestError) -> None:
        """Count a request refused for a field the SDK reads (the contract took it)."""
        if error.event is not None:
            self.metrics.requests.labels(policy_name, error.event, "invalid").inc()

    async def handle(self, policy_name: str, event: Event) -> Evaluation:
        """Evaluate one request (``engine.request.parse_request`` made its ``Event``); raises
        ``UnknownPolicyError``."""
        evaluation = self.engine.evaluate(policy_name, event)
        self._observe(evaluation)
        notes, missing_groups = await self._apply_effects(evaluation)
        if missing_groups:
            evaluation = replace(
                evaluation, reply=_without_rdt_class(evaluation.reply, missing_groups)
            )
        if evaluation.decision.push:
            notes.extend(self._push(evaluation))
        if notes:
            evaluation = _with_warnings(evaluation, notes)
        return evaluation

    def _observe(self, evaluation: Evaluation) -> None:
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

    async def _apply_effects(self, evaluation: Evaluation) -> tuple[list[str], list[str]]:
        """(warnings for the reply, resctrl groups that do not exist after applying)."""
        effects = evaluation.decision.effects
        if not effects:
            return [], []
        groups = [e.name for e in effects if isinstance(e, ResctrlGroup)]
        if evaluation.event.dry_run:
            notes = _effect_notes(effects, self.executor.mode, dry_run=True)
            return notes or ["pod-level effects not applied: dry_run request"], groups
        notes = _effect_notes(effects, self.executor.mode)
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
                f"could not be created ({self.node_state_reason('resctrl')})"
            )
        failed = [f"pod cgroup write failed: {f}" for f in report.failed]
        return notes + failed, report.missing_groups

    def node_state_reason(self, part: str) -> str:
        state = self._node_state.get(part) or {}
        return str(state.get("reason") or "see the log")

    def _push(self, evaluation: Evaluation) -> list[str]:
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

    # --- rule changes ----------------------------------------------------------------------

    async def resync(self, full: bool = True) -> bool:
        """Recompute every known container (current rules, current state) and push what changed;
        the reconciled policies' part is a full node-reconciler pass (pod-level values, drift).

        Returns False (and schedules a retry with back-off) if the bridge could not be used.
        """
        state = self._resync
        if self.bridge is None or not self.resync_policies:
            state.pending = state.periodic = False
            return True
        if state.lock is None:
            state.lock = asyncio.Lock()
        requests = state.requests
        async with state.lock:
            try:
                if not await self.bridge.ready():
                    self._wait_for_synchronize(full)
                    return False
                if full:
                    await self._resync_once(self.bridge)
                else:
                    await self._reconcile_once()
            except Exception as exc:  # bridge down, bad state, a host surprise: retry later
                state.pending = state.pending or full
                if self._bridge_not_up_yet(exc):
                    self.metrics.resyncs.labels("waiting").inc()
                    state.next_attempt = time.monotonic() + RESYNC_RETRY_INITIAL_S
                    return False
                if not isinstance(exc, BridgeUnreachableError):
                    state.bridge_answered = True  # it answered, with something unusable
                if not isinstance(exc, BridgeControlError | PayloadError):
                    log.exception("reconcile pass failed unexpectedly")
                self.metrics.resyncs.labels("failed").inc()
                log.error("resync failed, retrying in %.0fs: %s%s", state.backoff_s, exc,
                          self._unreachable_why(exc))
                state.next_attempt = time.monotonic() + state.backoff_s
                state.backoff_s = min(state.backoff_s * 2, RESYNC_RETRY_MAX_S)
                return False
        self.metrics.resyncs.labels("ok").inc()
        if not state.bridge_answered:
            state.bridge_answered = True
            log.info("the bridge's control API at %s answered; resynced", self.bridge.url)
        if full and state.requests == requests:  # none asked for while this pass ran
            state.pending = False
        state.periodic = False  # a full pass includes the reconciler's
        state.backoff_s = RESYNC_RETRY_INITIAL_S
        return True

    def _wait_for_synchronize(self, full: bool) -> None:
        """The bridge is up but not synchronized with the runtime (not connected yet, or
        answering the Synchronize now): its state is empty or about to change, and a pass now
        would compete with the Synchronize for the CPU. A full resync is retried; a periodic
        pass waits for the next interval."""
        state = self._resync
        state.periodic = False
        if full:
            state.pending = True
            state.next_attempt = time.monotonic() + RESYNC_RETRY_INITIAL_S
        self.metrics.resyncs.labels("waiting").inc()
        url = self.bridge.url if self.bridge is not None else "?"
        if not state.unsynchronized:
            state.unsynchronized = True
            log.info("the bridge at %s has not synchronized with the runtime yet; the resync "
                     "and the reconciler wait for it", url)
        else:
            log.debug("the bridge at %s has not synchronized with the runtime yet", url)

    def _bridge_not_up_yet(self, exc: Exception) -> bool:
        """True for the expected start-up order: the bridge's control socket is not there (or
        refuses connections), it never answered, and start-up was less than
        ``bridge_start_wait_s`` ago. Said once at INFO, then at DEBUG."""
        state = self._resync
        if (not isinstance(exc, BridgeUnreachableError) or state.bridge_answered
                or time.monotonic() - state.started >= self.options.bridge_start_wait_s):
            return False
        url = self.bridge.url if self.bridge is not None else "?"
        if not state.waiting:
            state.waiting = True
            log.info("waiting for the bridge's control socket at %s (not up yet); retrying "
                     "every %.0fs, an error after %.0fs", url, RESYNC_RETRY_INITIAL_S,
                     self.options.bridge_start_wait_s)
        else:
            log.debug("still waiting for the bridge's control socket at %s: %s", url, exc)
        return True

    def _unreachable_why(self, exc: Exception) -> str:
        """What an unreachable control socket means now, for the error line."""
        if not isinstance(exc, BridgeUnreachableError):
            return ""
        if self._resync.bridge_answered:
            return " (the bridge's control socket worked before: is the bridge still running?)"
        return (f" (no bridge control socket {self.options.bridge_start_wait_s:.0f}s after "
                "start-up: is the bridge running, with this control socket?)")

    async def _snapshot(self, bridge: BridgeControl) -> BridgeState:
        """The bridge's state, fetched while no event reached us (else the policies' state
        would be rebuilt from a view older than what they have already seen)."""
        for _ in range(RESYNC_SNAPSHOT_ATTEMPTS):
            seen = self.engine.node.generation
            snapshot = await bridge.state()
            if self.engine.node.generation == seen:
                return snapshot
        raise BridgeControlError(
            f"events kept arriving during {RESYNC_SNAPSHOT_ATTEMPTS} state fetches"
        )

    async def _resync_once(self, bridge: BridgeControl) -> None:
        snapshot = await self._snapshot(bridge)
        event = synchronize_event("resync", snapshot.pods, snapshot.containers)
        # A policy with a reconcile hook is evaluated by the reconciler (files read back).
        names = [n for n in self.resync_policies if n not in self._reconciled]
        # Every policy first, with no await in between: their state is rebuilt from one view.
        evaluations = [self.engine.evaluate(name, event) for name in names]
        pusher = self.pusher
        assert pusher is not None  # there is a bridge
        for evaluation in evaluations:
            name = evaluation.policy
            self._observe(evaluation)
            await self._apply_effects(evaluation)
            for warning in evaluation.decision.warnings:
                log.warning("resync policy=%s: %s", name, warning)
            updates = (
                *updates_to_json(evaluation.decision),
                *(update_to_json(u) for u in evaluation.decision.push),
            )
            log.info(
                "resync policy=%s: %d of %d containers need an update",
                name,
                len(updates),
                len(snapshot.containers),
            )
            if updates:
                pusher.submit(PushJob(name, "resync", updates))
        await pusher.join()
        await self._reconcile_once(snapshot)

    async def _reconcile_once(self, snapshot: BridgeState | None = None) -> None:
        if self.reconciler is None:
            return
        report = await self.reconciler.run(snapshot)
        for error in report.errors[:20]:
            log.warning("reconcile: %s", error)


def _with_warnings(evaluation: Evaluation, notes: list[str]) -> Evaluation:
    reply = dict(evaluation.reply)
    warnings = [*reply.get("warnings", []), *notes][:MAX_WARNINGS]
    reply["warnings"] = warnings
    return replace(evaluation, reply=reply)
