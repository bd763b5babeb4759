"""The server's side of the SDK's extension points: what it asks of a registry's policies.

Owns ``Host`` (the SDK's ``PolicyHost`` for one policy's background task, over the few server
calls it needs), the guard that keeps one failing background task from stopping the others,
and the questions the server asks of the registry: each policy's reconcile hook, its state
description (``GET /v1/policies/{name}/state``), the configuration status and state of the
policy ``--rules`` configures (the catalogue's ``DEFAULT_POLICY``: ``/healthz``, ``GET
/v1/rules``), every policy's configuration status (``/healthz``: a refused reload) and the
node needs of all of them together.

Must not: import a policy module or know what a policy does with its extension points.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Mapping
from typing import Any, Protocol

from policy_server.policies import DEFAULT_POLICY
from policy_server.sdk.extension import ConfigStatus, ReconcileHook, ReloadResult
from policy_server.sdk.node_plan import NO_NEEDS, NodeNeeds
from policy_server.sdk.registry import Policy, Registry

log = logging.getLogger(__name__)


class Server(Protocol):
    """What ``Host`` needs of the request service (``PolicyServer``)."""

    @property
    def poll_interval_s(self) -> float: ...

    async def stopped(self, timeout_s: float) -> bool: ...

    async def config_polled(self, result: ReloadResult, status: ConfigStatus) -> None: ...


class Host:
    """``PolicyHost`` for one policy's background task: the server, seen through the SDK."""

    def __init__(self, server: Server, policy: str) -> None:
        self._server = server
        self.policy = policy

    @property
    def poll_interval_s(self) -> float:
        return self._server.poll_interval_s

    async def stopped(self, timeout_s: float) -> bool:
        return await self._server.stopped(timeout_s)

    async def config_polled(self, result: ReloadResult, status: ConfigStatus) -> None:
        await self._server.config_polled(result, status)


async def run_guarded(policy: str, task: Awaitable[None]) -> None:
    """A policy's background task: its failure is logged and ends only that task."""
    try:
        await task
    except Exception:
        log.exception("background task of policy %s failed; the policy keeps serving", policy)


def reconcile_hooks(registry: Registry) -> dict[str, ReconcileHook]:
    """policy name -> reconcile hook, in registry order (the node reconciler's policies)."""
    return {p.name: p.extensions.reconcile for p in registry if p.extensions.reconcile is not None}


def policy_state(registry: Registry, name: str) -> Mapping[str, Any] | None:
    """The policy's state description (None: it has none); raises ``UnknownPolicyError``."""
    hook = registry.get(name).extensions.describe
    return hook() if hook is not None else None


def _rules_policy(registry: Registry) -> Policy[Any] | None:
    return next((p for p in registry if p.name == DEFAULT_POLICY), None)


def config_status(registry: Registry) -> ConfigStatus | None:
    """The configuration status of the policy ``--rules`` configures (None: not served)."""
    policy = _rules_policy(registry)
    hook = policy.extensions.config if policy is not None else None
    return hook() if hook is not None else None


def config_statuses(registry: Registry) -> dict[str, ConfigStatus]:
    """Every policy's configuration status (a refused reload among them), by name; only the
    policies that read a configuration (a ``config_status`` hook)."""
    out = {}
    for policy in registry:
        hook = policy.extensions.config
        if hook is not None:
            out[policy.name] = hook()
    return out


def rules_state(registry: Registry) -> Mapping[str, Any] | None:
    """The state description of the policy ``--rules`` configures (``GET /v1/rules``)."""
    policy = _rules_policy(registry)
    return policy_state(registry, policy.name) if policy is not None else None


def node_needs(registry: Registry) -> NodeNeeds:
    """What the policies' configurations in force ask of the node, together."""
    needs = NO_NEEDS
    for policy in registry:
        if policy.extensions.needs is not None:
            needs = needs | policy.extensions.needs()
    return needs
