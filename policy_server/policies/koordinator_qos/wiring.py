"""koordinator-qos as the server runs it: the policy, its rules file and its extension points.

Owns ``build(settings)`` (the catalogue's entry: ``--policy koordinator-qos[=RULES]``, and
``--rules RULES`` as its alias) and ``KoordinatorQoS``, which ties the rules file to the policy
through the SDK's extension points only: the rules watcher is the policy's background task
(an applied change is reported to the host, which recomputes every known container), its
state description is the rules in force (``GET /v1/policies/koordinator-qos/state``, and
``GET /v1/rules``), its reconcile hook is ``qos_node_plan.plan_node`` and its node needs follow the
feature gates in force. The initial load happens in ``build``: a bad rules file, or one naming
CPUs or NUMA nodes the node does not have (``node_fit``), stops the server before it listens.

Must not: import anything of the server but the SDK (an import-linter contract).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from policy_server.policies.koordinator_qos import qos_node_plan
from policy_server.policies.koordinator_qos.authority import Refusal, Refusals
from policy_server.policies.koordinator_qos.baselines import QuotaBaselines
from policy_server.policies.koordinator_qos.bundle import KoordContext, build_policy
from policy_server.policies.koordinator_qos.node_fit import check_fits
from policy_server.policies.koordinator_qos.rules import (
    Rules,
    rules_from_yaml,
    rules_summary,
    stabilize,
)
from policy_server.policies.koordinator_qos.rules_watcher import RulesSource, watch
from policy_server.policies.policy_config import PolicySettings
from policy_server.sdk import (
    UNKNOWN_NODE,
    ConfigStatus,
    Event,
    NodeFacts,
    NodeNeeds,
    NodePlan,
    Policy,
    PolicyHost,
    ReloadResult,
)

log = logging.getLogger(__name__)
_LOGGED_MAX = 4096

# The catalogue hands ``build`` the file's path unread: the rules have their own parser and the
# watcher reads the file again on every change.
READS_OWN_CONFIG = True
DESCRIPTION = (
    "koordinator koordlet runtime-hook QoS (CPU sets, batch resources, group identity, CPU "
    "normalization, GPU env, OOM score, resctrl class); CONFIG is the rules file (--rules)"
)


class KoordinatorQoS:
    """The policy and its rules source; see the module docstring."""

    def __init__(self, rules_path: Path | None, node: NodeFacts = UNKNOWN_NODE) -> None:
        topology = node.topology
        self.rules: RulesSource[Rules] = RulesSource(
            rules_path, lambda text: check_fits(rules_from_yaml(text), topology), Rules(),
            stabilize,
        )
        self.refusals = Refusals("koordinator-qos")
        self._logged: set[tuple[str, str, str]] = set()
        self.baselines = QuotaBaselines()
        self.policy: Policy[KoordContext] = build_policy(
            lambda: self.rules.current, self.baselines, node=node, refusals=self.refusals
        )
        self.policy.background(self.watch)
        self.policy.describe(self.describe)
        self.policy.config_status(self.status)
        self.policy.reconcile(self.plan)
        self.policy.node_needs(self.needs)

    def load(self) -> None:
        """The initial load; raises ``RulesError`` (nothing to fall back on yet)."""
        self.rules.load()
        self._warn_ignored()

    def _warn_ignored(self) -> None:
        error = self.rules.current.cpu_normalization_ratio_error
        if error is not None:
            log.warning(
                "rules: %s; ratio ignored, %s in force",
                error,
                self.rules.current.cpu_normalization_ratio or "no ratio",
            )

    # --- extension points ------------------------------------------------------------------

    async def watch(self, host: PolicyHost) -> None:
        """The background task: poll the rules file until the server stops."""
        if self.rules.path is None:
            return  # defaults, nothing to watch

        async def report(result: ReloadResult) -> None:
            await self.reported(host, result)

        await watch(self.rules, report, host.stopped, host.poll_interval_s)

    async def reported(self, host: PolicyHost, result: ReloadResult) -> None:
        """Tell the host what one poll found (an applied change: every container again)."""
        if result is ReloadResult.APPLIED:
            self._warn_ignored()
        await host.config_polled(result, self.status())

    def status(self) -> ConfigStatus:
        path = self.rules.path
        return ConfigStatus(
            str(path) if path else None, self.rules.generation, self.rules.last_error
        )

    def describe(self) -> Mapping[str, Any]:
        return {**self.status().to_json(), "rules": rules_summary(self.rules.current)}

    def plan(self, event: Event) -> NodePlan:
        refused: list[Refusal] = []
        plan = qos_node_plan.plan_node(event, self.rules.current, refused, self.baselines.view())
        self.refusals.record(refused)
        for r in refused:
            # Every reconcile pass sees the same pods: say it once per pod, key and rule.
            seen = (r.pod, r.key, r.rule)
            if seen not in self._logged and len(self._logged) < _LOGGED_MAX:
                self._logged.add(seen)
                log.warning("node reconciler: %s", r.message())
        return plan

    def needs(self) -> NodeNeeds:
        return qos_node_plan.needs(self.rules.current)


def build(settings: PolicySettings) -> Policy[KoordContext]:
    """koordinator-qos with the rules file ``settings.path`` (koordlet's defaults without one),
    loaded now; raises ``RulesError``."""
    koordinator = KoordinatorQoS(settings.path, settings.node)
    koordinator.load()
    return koordinator.policy
