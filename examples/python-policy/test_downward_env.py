"""Tests for downward_env.py, written with the policy test kit (policy_server.testing).

Run them with ``pytest examples/python-policy``. ``policy_runner`` is the kit's pytest fixture
(available wherever nri-webhook-bridge is installed); it runs the policy in-process, checks
every request and reply against the webhook contract, and starts no server.
"""

from __future__ import annotations

from pathlib import Path

from policy_server.testing import make_request
from policy_server.testing.plugin import RunnerFactory

HERE = Path(__file__).parent
POLICY = HERE / "downward_env.py"
REQUESTS = HERE.parent / "requests"


def test_a_shipped_fixture(policy_runner: RunnerFactory) -> None:
    reply = policy_runner(POLICY).send(REQUESTS / "label-env-create.json")
    assert reply.adjust["env"] == [
        {"key": "POD_NAME", "value": "payments-api"},
        {"key": "POD_NAMESPACE", "value": "default"},
        {"key": "POD_UID", "value": "7f7c2a0e-1111-4c3a-9a51-1d1f2b3c4d5e"},
        {"key": "CONTAINER_NAME", "value": "app"},
    ]
    assert reply.warnings == []


def test_a_containers_own_value_wins(policy_runner: RunnerFactory) -> None:
    request = make_request(
        "CreateContainer",
        pod={"id": "p1", "name": "web", "namespace": "shop", "uid": "u1"},
        container={"id": "c1", "name": "nginx", "env": ["POD_NAME=custom", "PATH=/bin"]},
    )
    reply = policy_runner(POLICY).send(request)
    assert [e["key"] for e in reply.adjust["env"]] == ["POD_NAMESPACE", "POD_UID",
                                                       "CONTAINER_NAME"]  # fmt: skip
    assert reply.warnings == ["nginx: keeps its own POD_NAME"]


def test_other_events_change_nothing(policy_runner: RunnerFactory) -> None:
    runner = policy_runner(POLICY)
    for event in ("RunPodSandbox", "StartContainer", "UpdateContainer", "RemoveContainer"):
        assert runner.send(make_request(event)).no_change


def test_replay_of_a_recording(policy_runner: RunnerFactory) -> None:
    """recording.jsonl is `nri-webhook-bridge record` output (containerd 2.1.9's traffic for
    one pod's whole life, served by this policy); the policy must still answer the same."""
    result = policy_runner(POLICY).replay(HERE / "recording.jsonl")
    result.assert_ok()
    assert len(result.outcomes) == 7
