"""Validating webhooks and runtime capabilities, through the simulator's recorded profiles.

- a webhook subscribed to ValidateContainerAdjustment sees the final merged adjustment
  with its owners and the plugin list, and its `reject` becomes the validator reject that
  fails CRI CreateContainer with the runtime's message carrying the webhook's reason;
- the envelope's `runtime` says which adjustment fields the runtime applies; a policy
  that sets one the runtime would drop is warned about and counted, and still answered.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridge.simulator.cri_calls import run_cri
from bridge.simulator.runtime import SimulatedRuntime
from tests.integration.harness import pod_and_container, running_bridge, short_tmpdir, webhook
from tests.integration.policy_app import Knobs, serve_policy

pytestmark = pytest.mark.timeout(30)

MUTATE = {"adjust": {"env": [{"key": "POLICY", "value": "applied"}],
                     "linux": {"resources": {"cpu": {"shares": 777}}}}}


@pytest.fixture
def workdir() -> Iterator[Path]:
    with short_tmpdir() as path:
        yield path


@pytest.mark.parametrize("profile", ["containerd-2.2.7", "containerd-2.3.4",
                                     "containerd-2.4.0-beta.0", "cri-o-1.36.3", "cri-o-1.37.0"])
async def test_validating_webhook_sees_the_merged_adjustment_and_its_reject_fails_create(
        workdir: Path, profile: str) -> None:
    knobs = Knobs(replies={"CreateContainer": MUTATE, "ValidateContainerAdjustment": {
        "reject": {"reason": "cpu shares above 512 need approval"}}})
    sock = workdir / "policy.sock"
    hooks = [webhook(sock, name="mutate", events=["CreateContainer"]),
             webhook(sock, name="guard", events=["ValidateContainerAdjustment"])]
    runtime = SimulatedRuntime(workdir / "nri.sock", profile)
    await runtime.start()
    try:
        async with serve_policy(str(sock), knobs), running_bridge(runtime, hooks, workdir):
            assert runtime.plugins[0].events & 0x2000  # the bridge subscribed as a validator
            pod, container = pod_and_container()
            result = await run_cri(runtime, "CreateContainer", pod, container)
    finally:
        await runtime.stop()
    assert result.error == (
        'validator "50-webhook-bridge" rejected container adjustment, reason: webhook "guard" '
        "rejected ValidateContainerAdjustment: cpu shares above 512 need approval")
    assert container.id not in runtime.state.containers  # nothing was applied
    [validate] = [b for b in knobs.seen if b["event"] == "ValidateContainerAdjustment"]
    # The final merged adjustment (the bridge's own mutation included) with its owners.
    assert validate["adjust"]["env"] == [{"key": "POLICY", "value": "applied"}]
    assert validate["adjust"]["linux"]["resources"]["cpu"]["shares"] == 777
    owners = validate["owners"]["owners"][container.id]
    assert owners["simple"]["16"] == "50-webhook-bridge"  # Field.CPUShares
    assert owners["compound"]["6"]["owners"] == {"POLICY": "50-webhook-bridge"}  # Field.Env
    assert validate["plugins"] == [{"name": "webhook-bridge", "index": "50"}]
    assert validate["container"]["id"] == container.id
    assert "POLICY=applied" not in validate["container"].get("env", [])  # before adjustment


PIDS = {"adjust": {"linux": {"resources": {"pids": {"limit": 100}}}}}


async def test_a_field_the_runtime_would_drop_is_warned_about_counted_and_still_answered(
        workdir: Path, caplog: pytest.LogCaptureFixture) -> None:
    knobs = Knobs(replies={"CreateContainer": PIDS})
    sock = workdir / "policy.sock"
    # containerd 1.7.24 embeds NRI v0.6.1: LinuxResources.pids came with v0.7.0.
    runtime = SimulatedRuntime(workdir / "nri.sock", "containerd-1.7.24")
    await runtime.start()
    try:
        async with serve_policy(str(sock), knobs), \
                running_bridge(runtime, [webhook(sock)], workdir) as bridge:
            with caplog.at_level(logging.WARNING, logger="bridge.webhooks.webhook_handler"):
                result = await runtime.create_container(*pod_and_container())
            exposition = bridge.metrics.exposition().decode()
    finally:
        await runtime.stop()
    assert result.ok, result.error  # answered in time, the contribution kept
    assert result.response is not None
    assert result.response.adjust.linux.resources.pids.limit == 100  # type: ignore[attr-defined]
    [sent] = [b for b in knobs.seen if b["event"] == "CreateContainer"]
    assert sent["runtime"]["nri_version"] == "v0.6.1"
    assert "linux.resources.pids" not in sent["runtime"]["capabilities"]
    warnings = [r for r in caplog.records if "will ignore fields" in r.getMessage()]
    assert [getattr(r, "fields", None) for r in warnings] == [["linux.resources.pids"]]
    assert ('nri_webhook_bridge_dropped_fields_total{event="CreateContainer",'
            'field="linux.resources.pids",webhook="policy"} 1.0') in exposition
