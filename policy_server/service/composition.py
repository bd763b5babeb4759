"""The policy server minus HTTP: its parts built from ``ServerOptions``, and their lifetime.

Builds the registry (the built-in policies: koordinator-qos by default and those enabled with
``--policy``, then ``--policy-module`` policies), the engine, the node-effect executor, the
bridge client and pusher, the node reconciler, the settle step (``service.settle``), the resync
(``service.resync``) and the node status (``service.node_status``); runs the policies'
background tasks (``service.policy_host``: the SDK's extension points seen from the server) and
the resync's ticks until stopped. ``PolicyServer.handle`` is one request: the engine decides, the
settle step settles the decision, and ``http_edge.hot_route`` sends the settled reply's bytes
(``engine.settled.Settled.body``: encoded once). ``policy_server.assemble`` puts it together with
its HTTP edge. Must not: name a policy (the catalogue,
``policy_server.policies``, says which built-ins are served) or import one, or encode a reply.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from bridge.contract.catalogue import EventName
from policy_server.bridge_link.control_client import BridgeControl
from policy_server.bridge_link.pusher import Pusher
from policy_server.engine.evaluate import Engine
from policy_server.engine.loader import load_policies
from policy_server.engine.settled import Settled
from policy_server.exceptions import RequestError
from policy_server.node import probe
from policy_server.node.cpu_weight import CpuWeights
from policy_server.node.executor import NodeExecutor
from policy_server.node.node_topology import read_topology
from policy_server.node.pod_confinement import PodHierarchy
from policy_server.node.procfs import Procfs
from policy_server.node.reconciler import NodeReconciler
from policy_server.node.resctrl_fs import ResctrlFS
from policy_server.node.systemd_bus import SystemdBus
from policy_server.node.unit_properties import SystemdUnits
from policy_server.policies import build_builtin, enabled_builtins
from policy_server.sdk.extension import ConfigStatus, ReloadResult
from policy_server.sdk.model import Event
from policy_server.sdk.registry import Policy, Registry
from policy_server.service import policy_host
from policy_server.service.node_status import NodeStatus
from policy_server.service.options import ServerOptions
from policy_server.service.resync import Resync
from policy_server.service.settle import Settle
from policy_server.telemetry import Metrics

log = logging.getLogger(__name__)


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
        self.executor = NodeExecutor(
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
            PodHierarchy.of(options.kubelet_cgroup_root),
        )
        # Found out once: every policy sees them (node.facts; built-ins also at build time).
        topology = (None if options.sys_root is None
                    else read_topology(options.sys_root, options.proc_root))
        self.facts = probe.node_facts(self.executor, topology)
        self.registry = Registry()
        builtins = enabled_builtins(
            options.builtin_policies, options.rules_path, options.default_policies
        )
        for name, config in builtins:  # a bad configuration raises here, before listening
            self.registry.add(build_builtin(name, config, self.facts))
        for policy in [*load_policies(options.policy_modules), *extra_policies]:
            self.registry.add(policy)
        self.engine = Engine(self.registry, self.facts)
        self.metrics.export_policy_counters(
            lambda: (
                (p.name, sample)
                for p in self.registry
                if p.extensions.counters is not None
                for sample in p.extensions.counters()
            )
        )
        if bridge is None and options.bridge_control:
            bridge = BridgeControl(options.bridge_control, trust=options.bridge_trust)
        self.bridge = bridge
        self.pusher = Pusher(bridge, self.metrics) if bridge is not None else None
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
                settle=lambda evaluation: self.settle.own(evaluation, "reconcile"),
                procfs=self.procfs,
            )
        self.node_status = NodeStatus(
            self.executor,
            self.reconciler,
            self.procfs,
            options.reconcile_interval_s,
            policy_host.node_needs(self.registry),
            self.facts,
        )
        self.settle = Settle(self.executor, self.metrics, self.pusher, self.node_status.reason)
        self.resync_policies = tuple(
            p.name for p in self.registry if EventName.SYNCHRONIZE in p.events
        )
        self.resync = Resync(
            options,
            bridge,
            self.engine,
            self.settle,
            self.reconciler,
            self.resync_policies,
            # Evaluated by the reconciler's pass (with the cgroup files read back).
            frozenset(plans) if self.reconciler is not None else frozenset(),
        )
        self._stop: asyncio.Event | None = None
        self._config_metrics()

    def _config_metrics(self) -> None:
        """The configuration metrics after the initial loads (done when building: a policy
        whose configuration does not load stops the server, so what is served is valid, also
        when no policy has a configuration to report, as with --no-koordinator)."""
        status = policy_host.config_status(self.registry)
        if status is not None:
            self.metrics.rules_generation.set(status.generation)
        self.metrics.rules_valid.set(1)

    # --- requests --------------------------------------------------------------------------

    def refused(self, policy_name: str, error: RequestError) -> None:
        """Count a request refused for a field the SDK reads (the contract took it)."""
        if error.event is not None:
            self.metrics.requests.labels(policy_name, error.event, "invalid").inc()

    async def handle(self, policy_name: str, event: Event) -> Settled:
        """Evaluate one request (``engine.request.parse_request`` made its ``Event``) and settle
        its decision; raises ``UnknownPolicyError``."""
        return await self.settle.reply(self.engine.evaluate(policy_name, event))

    # --- the node --------------------------------------------------------------------------

    def probe_node(self) -> dict[str, Any]:
        """Find out once what can take effect on this node; log what cannot, once."""
        return self.node_status.probe()

    def node_state(self) -> dict[str, Any]:
        """The node-effect status for ``GET /v1/state`` (probed at start-up)."""
        return self.node_status.describe()

    # --- lifetime (and the policy host: service.policy_host.Server) -------------------------

    async def run_background(self, stop: asyncio.Event) -> None:
        """Run the policies' background tasks and the resync's ticks until ``stop`` is set."""
        self._stop = stop
        self.resync.start()
        if self.bridge is not None and self.resync_policies:
            # Catch up with what happened while we were down (rules, containers) right away.
            await self.resync.on_poll(ReloadResult.UNCHANGED)
        async with asyncio.TaskGroup() as tasks:
            for policy in self.registry:
                task = policy.extensions.background
                if task is not None:
                    host = policy_host.Host(self, policy.name)
                    tasks.create_task(
                        policy_host.run_guarded(policy.name, task(host)), name=policy.name
                    )
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

    async def config_polled(self, result: ReloadResult, status: ConfigStatus) -> None:
        """A policy's configuration was looked at (``PolicyHost.config_polled``)."""
        if result is ReloadResult.APPLIED:
            self.metrics.rules_generation.set(status.generation)
        await self.resync.on_poll(result)

    async def _ticks(self) -> None:
        while not await self.stopped(self.options.rules_poll_interval_s):
            try:
                await self.resync.on_poll(ReloadResult.UNCHANGED)
            except Exception:  # a task boundary: one bad tick must not end the others
                log.exception("resync tick failed")

    async def aclose(self) -> None:
        if self.pusher is not None:
            await self.pusher.aclose()
        if self.bridge is not None:
            await self.bridge.aclose()
