"""What node effects can take effect here, found out once: the server's view of the probe.

Owns the probe's result for this server (``NodeStatus.probe``, run at start-up; its log lines
say once what cannot take effect and why), its description for ``GET /v1/state`` and the reason
a part is off, for the warnings a request gets. The probing itself is ``node.probe``'s. Must
not: apply an effect, or ask a policy anything but its node needs.
"""

from __future__ import annotations

from typing import Any

from policy_server.node import probe
from policy_server.node.executor import NodeExecutor
from policy_server.node.procfs import Procfs
from policy_server.node.reconciler import NodeReconciler
from policy_server.sdk.node_facts import NodeFacts
from policy_server.sdk.node_plan import NodeNeeds


class NodeStatus:
    """The probed node-effect status (module docstring)."""

    def __init__(
        self,
        executor: NodeExecutor,
        reconciler: NodeReconciler | None,
        procfs: Procfs,
        reconcile_interval_s: float,
        needs: NodeNeeds,
        facts: NodeFacts,
    ) -> None:
        self._executor = executor
        self._reconciler = reconciler
        self._procfs = procfs
        self._interval_s = reconcile_interval_s
        self._needs = needs
        self._facts = facts
        self._state: dict[str, Any] = {}

    def probe(self) -> dict[str, Any]:
        """Find out once what can take effect on this node; log what cannot, once."""
        self._state = probe.probe_node(
            self._executor,
            self._reconciler,
            self._procfs,
            self._interval_s,
            self._needs,
            self._facts,
        )
        return self._state

    def describe(self) -> dict[str, Any]:
        """The node-effect status for ``GET /v1/state`` (probed at start-up, else now)."""
        if not self._state:
            self.probe()
        return probe.describe_node_state(self._state, self._executor, self._reconciler)

    def reason(self, part: str) -> str:
        """Why ``part`` (``resctrl``, ...) cannot take effect, as the probe said."""
        state = self._state.get(part) or {}
        return str(state.get("reason") or "see the log")
