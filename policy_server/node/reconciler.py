"""The node reconciler: koordlet's periodic re-application of what it decided, with drift counts.

Serves every policy with a reconcile hook (``Policy.reconcile``, koordinator-qos's among them)
without knowing any. One ``run`` pass (every ``--reconcile-interval`` seconds, and after each
configuration change):

1. fetch all pods and containers from the bridge (``GET /v1/state``);
2. if the cgroup tree is readable, replace each container's resources by what its cgroup files
   say now, so a value reset behind our back shows up as a difference;
3. evaluate each such policy as a Synchronize, settled by the server's one settle step
   (``settle``: counted, its warnings logged): container differences become updates pushed
   through the bridge (``POST /v1/updates``; NRI writes them), with the decision's own pushes;
4. keep its decision's effects (``NodeExecutor.keep``: a pod cgroup file that holds another
   value is rewritten, a resctrl group created or fixed; kinds done once are left alone);
5. carry out the hooks' ``NodePlan``: cgroup values above the pods (kube-QoS level), the
   resctrl groups it owns by name prefix that no effect asks for removed (pods that are gone),
   processes' ``oom_score_adj``, core-scheduling cookies, kernel switches.

One bad container never stops a pass: an entry of the bridge's state the request decoder
refuses (``engine.request.node_synchronize``), or whose cgroup files cannot be read, is logged
naming it, counted (``policy_reconcile_container_failures_total{pass,reason}``) and left out,
and the pass goes on for the others; ``last`` (``GET /v1/state``) is the last pass's report,
that pass's error included when it failed as a whole.

Must not: decide anything itself (the decisions and plans are the policies'), name a policy, or
let one failing part stop the others. Drift found/fixed are counted per level in the metrics.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from bridge.process_setup.gc_pause import paused_gc
from policy_server.bridge_link.control_client import BridgeControl, BridgeState
from policy_server.bridge_link.pusher import PUSH_BATCH
from policy_server.engine.evaluate import Engine, Evaluation
from policy_server.engine.request import Skipped, node_synchronize
from policy_server.engine.settled import Settled
from policy_server.node import coresched
from policy_server.node.container_files import ContainerFiles
from policy_server.node.cpu_weight import WeightFormula, to_weight
from policy_server.node.execution import Drift, ExecutorMode
from policy_server.node.executor import NodeExecutor
from policy_server.node.procfs import Procfs
from policy_server.sdk.effects import Effect, ResctrlGroup, of_type
from policy_server.sdk.extension import ReconcileHook
from policy_server.sdk.model import Container, Event, Memory, Resources
from policy_server.sdk.node_plan import NO_PLAN, CoreSchedGroup, KernelSwitch, OomScore
from policy_server.telemetry import Metrics

log = logging.getLogger(__name__)

# koordlet's --runtime-hooks-reconcile-interval / --kubelet-sync-interval default.
DEFAULT_RECONCILE_INTERVAL_S = 10.0


@dataclass(slots=True)
class PassReport:
    """What one pass found and fixed, per level (container, pod, resctrl, oom, coresched, ...),
    the containers it skipped and why (``skipped``), and, if it failed as a whole, why
    (``error``); ``finished``: when it ended (Unix time)."""

    found: Counter[str] = field(default_factory=Counter)
    fixed: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    finished: float = 0.0


def skip(report: PassReport, metrics: Metrics, source: str, skipped: Skipped) -> None:
    """One entry of the bridge's state the decoder refused: logged, counted, reported."""
    log.warning("%s: skipped %s", source, skipped.text())
    metrics.container_failures.labels(source, "refused").inc()
    report.skipped.append(skipped.json())


def _pod_uids(pods: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Pod sandbox id -> pod UID: a container's cgroup must be below its own pod's."""
    return {str(p.get("id")): str(p.get("uid")) for p in pods if p.get("id") and p.get("uid")}


def _cgroups_path(raw: Mapping[str, Any]) -> str | None:
    linux = raw.get("linux")
    path = linux.get("cgroups_path") if isinstance(linux, dict) else None
    return path if isinstance(path, str) and path else None


def _file_values(
    containers: Sequence[Mapping[str, Any]], files: ContainerFiles, uids: Mapping[str, str]
) -> tuple[list[Mapping[str, int | str] | None], list[tuple[int, str]]]:
    """Each container's CPU/memory values as its cgroup files hold them now (None: unread,
    or its cgroups_path is not a container's below its pod's cgroup: ``pod_confinement``),
    and (index, error) of those whose files could not be read."""
    out: list[Mapping[str, int | str] | None] = []
    failed: list[tuple[int, str]] = []
    for i, raw in enumerate(containers):
        path = _cgroups_path(raw)
        uid = uids.get(str(raw.get("pod_sandbox_id", "")))
        try:
            out.append(files.values(path, uid) if path else None)
        except (OSError, ValueError) as exc:  # this container's files only: the others go on
            out.append(None)
            failed.append((i, f"{type(exc).__name__}: {exc}"))
    return out, failed


def _weight_observations(
    event: Event, values: Sequence[Mapping[str, int | str] | None]
) -> list[tuple[int, int]]:
    """(OCI shares NRI reported, ``cpu.weight`` read) of each container with both."""
    out = []
    for container, read in zip(event.containers, values, strict=True):
        shares = container.resources.cpu.shares if container.resources else None
        if shares and read is not None and "weight" in read:
            out.append((shares, int(read["weight"])))
    return out


def _with_file_values(
    event: Event,
    values: Sequence[Mapping[str, int | str] | None],
    weights: WeightFormula | None,
) -> Event:
    """``event`` with each container's CPU/memory values as read (``values``, in order);
    ``weights``: the runtime's shares -> weight formula (None: unknown, weights not judged)."""
    out = [
        container if read is None else _merged(container, read, weights)
        for container, read in zip(event.containers, values, strict=True)
    ]
    return replace(event, containers=tuple(out))


def _merged(
    container: Container, values: Mapping[str, int | str], weights: WeightFormula | None
) -> Container:
    resources = container.resources or Resources()
    cpu, memory = resources.cpu, resources.memory
    if "shares" in values:
        cpu = replace(cpu, shares=int(values["shares"]))
    elif (
        "weight" in values
        and weights is not None
        and cpu.shares  # 0 or none: unset, the runtime wrote no weight
        and to_weight(weights, cpu.shares) != values["weight"]
    ):
        # v2 keeps only the weight: another weight than the runtime makes of the shares means
        # different shares.
        cpu = replace(cpu, shares=-1)
    if "quota" in values:
        cpu = replace(cpu, quota=int(values["quota"]))
    if "cpus" in values:
        cpu = replace(cpu, cpus=str(values["cpus"]))
    if "memory" in values:
        memory = Memory(int(values["memory"]))
    return replace(container, resources=replace(resources, cpu=cpu, memory=memory))


class NodeReconciler:
    """See the module docstring."""

    def __init__(
        self,
        *,
        engine: Engine,
        executor: NodeExecutor,
        bridge: BridgeControl,
        metrics: Metrics,
        plans: Mapping[str, ReconcileHook],
        settle: Callable[[Evaluation], Settled],
        procfs: Procfs | None = None,
        prctl: coresched.Prctl | None = None,
    ) -> None:
        self.engine = engine
        self.executor = executor
        self.bridge = bridge
        self.metrics = metrics
        self.plans = dict(plans)  # policy name -> its reconcile hook, in registry order
        self.settle = settle  # the server's settle step for its own Synchronize
        self.procfs = procfs or Procfs()
        self.files = ContainerFiles(executor.root, executor.version, executor.pods)
        self.prctl = prctl
        self.core_sched = (False, "not probed")
        self.last: PassReport | None = None

    def probe(self) -> None:
        """Core scheduling support (once: the kernel does not change under us)."""
        if self.prctl is None:
            try:
                self.prctl = coresched.LinuxPrctl()
            except OSError as exc:
                self.core_sched = (False, f"no libc prctl: {exc}")
                return
        self.core_sched = coresched.probe(self.prctl)

    @property
    def writes(self) -> bool:
        return self.executor.mode is ExecutorMode.ON and self.executor.cgroups.writable

    # --- one pass ------------------------------------------------------------------------

    async def run(self, snapshot: BridgeState | None = None) -> PassReport:
        """One pass over ``snapshot`` (fetched if not given); raises ``BridgeControlError`` /
        ``PayloadError`` if the bridge fails (``last`` then says so)."""
        report = PassReport()
        try:
            return await self._run(snapshot, report)
        except Exception as exc:
            report.error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            report.finished = time.time()
            self.last = report

    async def _run(self, snapshot: BridgeState | None, report: PassReport) -> PassReport:
        started = time.perf_counter()
        if snapshot is None:
            snapshot = await self.bridge.state()
        with paused_gc():  # the whole node (bridge.process_setup.gc_pause)
            sync = node_synchronize("reconcile", snapshot.pods, snapshot.containers,
                                    snapshot.raw)
        for skipped in sync.skipped:
            skip(report, self.metrics, "reconcile", skipped)
        event, snapshot = sync.event, replace(snapshot, pods=sync.pods, containers=sync.containers)
        if self.writes:
            # Container files, so a value reset behind our back is seen (the bridge only knows
            # what NRI last reported).
            uids = _pod_uids(snapshot.pods)
            values, unread = await asyncio.to_thread(
                _file_values, snapshot.containers, self.files, uids)
            for i, error in unread:
                self._unreadable(report, snapshot.containers[i], error)
            weights = None
            if self.files.v2:
                weights = self.executor.weights.learn(_weight_observations(event, values))
            event = _with_file_values(event, values, weights)
        effects: list[Effect] = []
        for name in self.plans:
            with paused_gc():  # the whole node (bridge.process_setup.gc_pause)
                evaluation = self.engine.evaluate(name, event)
            settled = self.settle(evaluation)  # counted, its warnings logged
            await self._push(list(settled.pushes), report)
            effects.extend(settled.effects)
        await asyncio.to_thread(self._node, effects, event, snapshot, report)
        for level, count in report.found.items():
            self.metrics.drift_found.labels(level).inc(count)
        for level, count in report.fixed.items():
            self.metrics.drift_fixed.labels(level).inc(count)
        if report.found:
            log.info("reconcile: drift found %s, fixed %s", dict(report.found), dict(report.fixed))
        self.metrics.reconcile_seconds.observe(time.perf_counter() - started)
        return report

    def _unreadable(self, report: PassReport, container: Mapping[str, Any], error: str) -> None:
        """A container whose cgroup files could not be read: logged, counted, reported."""
        def text(key: str) -> str:
            value = container.get(key)
            return value[:200] if isinstance(value, str) else ""

        log.warning("reconcile: container %r (pod %r): cgroup files unreadable, skipped: %s",
                    text("id"), text("pod_sandbox_id"), error)
        self.metrics.container_failures.labels("reconcile", "unreadable").inc()
        report.skipped.append({"kind": "containers", "id": text("id"), "name": text("name"),
                               "pod": text("pod_sandbox_id"), "field": "linux.cgroups_path",
                               "error": error})

    async def _push(self, updates: list[dict[str, Any]], report: PassReport) -> None:
        if not updates:
            return
        report.found["container"] += len(updates)
        failed: list[Any] = []
        for start in range(0, len(updates), PUSH_BATCH):
            batch = updates[start : start + PUSH_BATCH]
            failed.extend(await self.bridge.push_updates(batch))
            self.metrics.pushed_updates.inc(len(batch))
        report.fixed["container"] += len(updates) - len(failed)
        log.info("reconcile: pushed %d container updates, %d failed", len(updates), len(failed))
        for item in failed:
            log.warning("reconcile: bridge reports failed update %r", item)

    # --- node-level parts (in a worker thread: file I/O) -----------------------------------

    def _node(
        self,
        effects: Sequence[Effect],
        event: Event,
        snapshot: BridgeState,
        report: PassReport,
    ) -> None:
        if self.executor.mode is not ExecutorMode.ON:
            return
        # The hooks are pure but walk every pod: computed here, off the event loop.
        plan = NO_PLAN
        for hook in self.plans.values():
            plan = plan.merged(hook(event))
        pods = frozenset(pod.id for pod in event.pods)
        self._keep(effects, report)
        if plan.resctrl_prefixes:
            wanted = {group.name for group in of_type(effects, ResctrlGroup)}
            _count(self.executor.prune_resctrl(plan.resctrl_prefixes, wanted), report)
        self._keep(plan.cgroup_writes, report, level="qos")
        core_sched = plan.core_sched is not None and self.core_sched[0] and self.prctl is not None
        if plan.oom_scores or core_sched:
            # Both walk the same containers; their PIDs are read from the cgroups once.
            running = self._containers(snapshot, pods)
            if plan.oom_scores:
                self._oom(running, plan.oom_scores, report)
            if core_sched and plan.core_sched is not None:
                self._core_sched(running, plan.core_sched, report)
        self._kernel_switches(plan.kernel_switches, report)

    def _keep(self, effects: Sequence[Effect], report: PassReport, level: str = "pod") -> None:
        for effect in effects:
            _count(self.executor.keep(effect, level), report)

    def _containers(
        self, snapshot: BridgeState, pods: frozenset[str]
    ) -> list[tuple[str, str, list[int]]]:
        """(pod id, container name, PIDs in its own cgroup) of every running container of a
        known pod: its cgroup.procs read through the confined path, so an OOM score is only
        ever written for a process of that container's cgroup below its pod's."""
        out = []
        uids = _pod_uids(snapshot.pods)
        for c in snapshot.containers:
            if c.get("state") == "CONTAINER_STOPPED":
                continue
            pod_id = str(c.get("pod_sandbox_id", ""))
            path = _cgroups_path(c)
            if pod_id not in pods or path is None:
                continue
            try:
                pids = self.files.pids(path, uids.get(pod_id))
            except (OSError, ValueError) as exc:  # this container only: the others go on
                log.warning("reconcile: container %r: cgroup.procs unreadable, skipped: %s",
                            c.get("id"), exc)
                self.metrics.container_failures.labels("reconcile", "unreadable").inc()
                continue
            out.append((pod_id, str(c.get("name", "")), pids))
        return out

    def _oom(
        self,
        running: list[tuple[str, str, list[int]]],
        scores: Sequence[OomScore],
        report: PassReport,
    ) -> None:
        wanted = {(s.pod_id, s.container): s.value for s in scores}
        for pod_id, name, pids in running:
            value = wanted.get((pod_id, name))
            if value is None:
                continue
            for pid in pids:
                current = self.procfs.oom_score_adj(pid)
                if current is None or current == value:
                    continue
                report.found["oom"] += 1
                error = self.procfs.set_oom_score_adj(pid, value)
                if error is None:
                    report.fixed["oom"] += 1
                else:
                    report.errors.append(error)

    def _core_sched(
        self,
        running: list[tuple[str, str, list[int]]],
        wanted: Sequence[CoreSchedGroup],
        report: PassReport,
    ) -> None:
        if self.prctl is None:
            return
        by_pod = {g.pod_id: g.group for g in wanted}
        groups: dict[str, list[int]] = {}
        clear: list[int] = []
        for pod_id, _name, pids in running:
            if pod_id not in by_pod:
                continue  # not managed (koordinator-qos: SYSTEM pods)
            group = by_pod[pod_id]
            if group is None:
                clear.extend(pids)
            else:
                groups.setdefault(group, []).extend(pids)
        outcome = coresched.apply_core_cookies(self.prctl, groups, clear)
        changed = len(outcome.assigned) + len(outcome.cleared) + len(outcome.created)
        report.found["coresched"] += changed + len(outcome.errors)
        report.fixed["coresched"] += changed
        report.errors.extend(outcome.errors)

    def _kernel_switches(self, switches: Sequence[KernelSwitch], report: PassReport) -> None:
        for switch in switches:
            name, value = switch.name, switch.value
            current = self.procfs.kernel_switch(name)
            if current is None or current == value:
                continue  # this kernel has no such switch, or it is set already
            report.found["sysctl"] += 1
            error = self.procfs.set_kernel_switch(name, value)
            if error is None:
                report.fixed["sysctl"] += 1
                log.info("kernel.%s set to %d", name, value)
            else:
                report.errors.append(error)


def _count(drift: Drift, report: PassReport) -> None:
    if drift.found:
        report.found[drift.level] += drift.found
        report.fixed[drift.level] += drift.fixed
    report.errors.extend(drift.errors)
