"""README's and docs/try.md's `send_pod` examples, as written there."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from .conftest import REPO

pytestmark = pytest.mark.processes  # starts processes: not in make check


def test_from_the_manifests_we_have(policy_runner: Callable[..., Any]) -> None:
    runner = policy_runner(str(REPO / "examples" / "label_env_policy.py"))
    (app,) = runner.send_pod(REPO / "examples" / "pods" / "lsr-pod.yaml")
    assert app.adjust == {"env": [{"key": "TEAM", "value": "payments"}]}
    assert "TEAM=payments" in app.effective["env"]
    assert app.qos_class == "Guaranteed" and app.reject is None
    assert list(app.requests) == ["CreateContainer"]  # the only event the policy handles


def test_every_container_of_a_workload(policy_runner: Callable[..., Any]) -> None:
    runner = policy_runner(str(REPO / "examples" / "label_env_policy.py"))
    got = runner.send_pod(REPO / "examples" / "pods" / "web-deployment.yaml")
    assert [(c.container, c.kind) for c in got] == [
        ("migrate", "init"), ("proxy", "sidecar"), ("web", "container")]
    assert all(c.warnings == [{"event": "CreateContainer", "message":
                               f"pod {c.pod} has no example.com/team"}] for c in got)
