"""Reply fields that would crash the runtime never reach it (issue 32, item 4).

NRI v0.11.0 panics merging an added sysctl (docs/protocol.md#reply-fields-that-crash-a-runtime):
containerd 2.2.7 and CRI-O 1.36.3 embed it, containerd 2.3.4 (NRI v0.12.0) does not. The real
bridge runs against the simulator's recorded profiles over the NRI socket, the simulated
runtime crashing as the real one would (tests/bridge/simulator/test_hazards.py), and a real
policy over HTTP.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridge.simulator.delivery import EventResult
from bridge.simulator.runtime import SimulatedRuntime
from tests.integration.harness import pod_and_container, running_bridge, short_tmpdir, webhook
from tests.integration.policy_app import Knobs, serve_policy

pytestmark = pytest.mark.timeout(30)

SYSCTL = {"adjust": {"env": [{"key": "POLICY", "value": "applied"}],
                     "linux": {"sysctl": {"net.core.somaxconn": "1024"}}}}
ALLOW = ["env", "sysctl"]
DROPPED = "dropped linux.sysctl from webhook"


@pytest.fixture
def workdir() -> Iterator[Path]:
    with short_tmpdir() as path:
        yield path


async def _create_with_a_sysctl(workdir: Path, profile: str, caplog: pytest.LogCaptureFixture,
                                ) -> tuple[Knobs, SimulatedRuntime, EventResult, str]:
    """One CreateContainer through the bridge whose webhook adds a sysctl: what the policy saw,
    the runtime, the result and the bridge's metrics."""
    knobs = Knobs(replies={"CreateContainer": SYSCTL})
    sock = workdir / "policy.sock"
    runtime = SimulatedRuntime(workdir / "nri.sock", profile)
    await runtime.start()
    try:
        async with serve_policy(str(sock), knobs), \
                running_bridge(runtime, [webhook(sock, name="tuner", allow=ALLOW)],
                               workdir) as bridge:
            with caplog.at_level(logging.WARNING, logger="bridge.webhooks.webhook_handler"):
                result = await runtime.create_container(*pod_and_container())
            exposition = bridge.metrics.exposition().decode()
    finally:
        await runtime.stop()
    return knobs, runtime, result, exposition


@pytest.mark.parametrize(("profile", "runtime_text"), [
    ("containerd-2.2.7", "containerd v2.2.7, NRI v0.11.0"),
    ("cri-o-1.36.3", "cri-o 1.36.3, NRI v0.11.0"),
])
async def test_an_added_sysctl_is_dropped_with_a_warning_on_nri_v0_11(
        workdir: Path, caplog: pytest.LogCaptureFixture, profile: str,
        runtime_text: str) -> None:
    knobs, runtime, result, exposition = await _create_with_a_sysctl(workdir, profile, caplog)
    container = result.container
    assert container is not None
    assert runtime.crashed is None
    assert result.ok, result.error
    created = runtime.state.containers[container.id]
    assert "POLICY=applied" in created.env  # the rest of the contribution is applied
    assert dict(created.linux.sysctl) == {}  # created without the sysctl
    assert result.response is not None
    assert not result.response.adjust.linux.sysctl  # type: ignore[attr-defined]
    [sent] = [b for b in knobs.seen if b["event"] == "CreateContainer"]
    assert "linux.sysctl" not in sent["runtime"]["capabilities"]
    [warning] = [r for r in caplog.records if DROPPED in r.getMessage()]
    assert warning.getMessage() == (f'dropped linux.sysctl from webhook "tuner": it would crash '
                                    f"the runtime ({runtime_text})")
    assert getattr(warning, "fields", None) == ["linux.sysctl"]
    assert "adjustSysctl" in getattr(warning, "why", "")
    assert ('nri_webhook_bridge_dropped_fields_total{event="CreateContainer",'
            'field="linux.sysctl",webhook="tuner"} 1.0') in exposition
    assert 'outcome="ok"' in exposition  # the call itself succeeded


async def test_an_added_sysctl_is_applied_on_containerd_2_3_4(
        workdir: Path, caplog: pytest.LogCaptureFixture) -> None:
    knobs, runtime, result, exposition = await _create_with_a_sysctl(
        workdir, "containerd-2.3.4", caplog)
    container = result.container
    assert container is not None
    assert result.ok, result.error
    created = runtime.state.containers[container.id]
    assert dict(created.linux.sysctl) == {"net.core.somaxconn": "1024"}
    [sent] = [b for b in knobs.seen if b["event"] == "CreateContainer"]
    assert "linux.sysctl" in sent["runtime"]["capabilities"]
    assert not [r for r in caplog.records if DROPPED in r.getMessage()]
    assert "nri_webhook_bridge_dropped_fields_total{" not in exposition
