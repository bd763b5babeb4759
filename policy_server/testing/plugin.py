"""The pytest fixture of the policy test kit: ``policy_runner``.

Loaded automatically by pytest when nri-webhook-bridge is installed (entry point ``pytest11``).
``policy_runner(...)`` takes what ``PolicyRunner`` does: ``Policy`` objects, a module path
(``"examples/label_env_policy.py"``) or ``builtin="ulimit-adjuster"`` with ``config=``. Each test
gets fresh runners, so policy state never leaks from one test into the next. Must not hold
state across tests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from policy_server.sdk.registry import Policy
from policy_server.testing import PolicyRunner

RunnerFactory = Callable[..., PolicyRunner]


@pytest.fixture
def policy_runner() -> RunnerFactory:
    """A factory: ``policy_runner(policy)``, ``policy_runner("my_policy.py")``,
    ``policy_runner(builtin="hook-injector", config={...})``."""

    def make(
        *targets: Policy[Any] | str | Path,
        builtin: str | None = None,
        config: Mapping[str, Any] | Path | None = None,
    ) -> PolicyRunner:
        if builtin is not None:
            if targets:
                raise TypeError("policy_runner: give policies or builtin=, not both")
            return PolicyRunner.builtin(builtin, config)
        policies: list[Policy[Any]] = []
        for target in targets:
            if isinstance(target, Policy):
                policies.append(target)
            else:
                policies.extend(PolicyRunner.from_module(target).registry)
        return PolicyRunner(*policies)

    return make
