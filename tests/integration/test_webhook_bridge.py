"""Simulator over the real NRI protocol -> bridge -> uvicorn policy on a Unix socket -> back."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bridge.simulator.cri_server import serve_cri
from bridge.simulator.runtime import SimulatedRuntime
from bridge.simulator.synthetic import synthetic_state
from tests.integration.harness import pod_and_container, running_bridge, short_tmpdir, webhook
from tests.integration.policy_app import Knobs, serve_policy
from tests.waiting import until

# The runtime's request timeout, the webhooks' timeouts and the policy's delays run on the event
# loop's clock (the simulated runtime, the bridge and the policy app share this loop): looptime
# moves it to the next timer when the loop is idle, so a 3 s policy costs no wall second
# (docs/performance.md#make-check). Durations are measured on that clock, `loop.time()`.
pytestmark = [pytest.mark.timeout(30), pytest.mark.looptime]

ADJUST = {"adjust": {"env": [{"key": "POLICY", "value": "applied"}],
                     "linux": {"resources": {"cpu": {"shares": 777}}}}}


@pytest.fixture
def workdir() -> Iterator[Path]:
    with short_tmpdir() as path:
        yield path


@pytest.fixture
async def runtime(workdir: Path) -> AsyncIterator[SimulatedRuntime]:
    rt = serve_cri(SimulatedRuntime(workdir / "nri.sock", "containerd-2.1.9",
                                    request_timeout_s=1.0), workdir / "cri.sock")
    await rt.start()
    try:
        yield rt
    finally:
        await rt.stop()


def _env(container: Any) -> dict[str, str]:
    return dict(e.split("=", 1) for e in container.env)


async def test_policy_adjusts_the_container(runtime: SimulatedRuntime, workdir: Path) -> None:
    knobs = Knobs(replies={"CreateContainer": ADJUST})
    async with serve_policy(str(workdir / "policy.sock"), knobs), \
            running_bridge(runtime, [webhook(workdir / "policy.sock")], workdir):
        result = await runtime.create_container(*pod_and_container())
    assert result.ok, result.error
    assert result.container is not None
    assert _env(result.container)["POLICY"] == "applied"
    assert result.container.linux.resources.cpu.shares.value == 777
    assert "CreateContainer" in knobs.events()
    assert runtime.closed_plugins == []


@pytest.mark.parametrize("policy", ["Ignore", "Fail"])
async def test_policy_slower_than_the_runtime_never_gets_the_bridge_dropped(
        runtime: SimulatedRuntime, workdir: Path, policy: str) -> None:
    # The webhook's own timeout (5 s) is far beyond the runtime's (1 s): the
    # bridge must cap the call at the runtime's deadline and answer in time.
    knobs = Knobs(replies={"CreateContainer": ADJUST}, delay_s={"CreateContainer": 3.0})
    hook = webhook(workdir / "policy.sock", timeout="5s", failure_policy=policy)
    async with serve_policy(str(workdir / "policy.sock"), knobs), \
            running_bridge(runtime, [hook], workdir) as bridge:
        loop = asyncio.get_running_loop()
        results, took = [], []
        for i in range(2):
            started = loop.time()
            results.append(await runtime.create_container(*pod_and_container(f"c{i}")))
            took.append(loop.time() - started)
        assert bridge.runner.ready
    assert runtime.closed_plugins == []
    # Answered within the runtime's 1 s, after waiting for the policy most of it.
    assert all(0.5 < t < 1.0 for t in took), took
    for result in results:
        if policy == "Ignore":
            assert result.ok and "POLICY" not in _env(result.container)
        else:
            assert result.error is not None and 'webhook "policy" failed (timeout)' in result.error


@pytest.mark.parametrize("policy", ["Ignore", "Fail"])
async def test_policy_down(runtime: SimulatedRuntime, workdir: Path, policy: str) -> None:
    hook = webhook(workdir / "nobody-listens.sock", failure_policy=policy)
    async with running_bridge(runtime, [hook], workdir) as bridge:
        result = await runtime.create_container(*pod_and_container())
        metrics = bridge.metrics.exposition().decode()
    assert runtime.closed_plugins == []
    if policy == "Ignore":
        assert result.ok
        assert ('nri_webhook_bridge_webhook_fail_open_total{event="CreateContainer",'
                'webhook="policy"} 1.0') in metrics
    else:
        assert result.error is not None and "connect_error" in result.error
        assert ('nri_webhook_bridge_webhook_rejections_total{event="CreateContainer",'
                'webhook="policy"} 1.0') in metrics


async def test_shadow_mode_applies_nothing_and_logs_the_diff(
        runtime: SimulatedRuntime, workdir: Path, caplog: pytest.LogCaptureFixture) -> None:
    knobs = Knobs(replies={"CreateContainer": ADJUST})
    hook = webhook(workdir / "policy.sock", mode="shadow")
    with caplog.at_level(logging.INFO, logger="bridge.webhooks.webhook_handler"):
        async with serve_policy(str(workdir / "policy.sock"), knobs), \
                running_bridge(runtime, [hook], workdir):
            result = await runtime.create_container(*pod_and_container())
    assert result.ok and result.container is not None
    assert "POLICY" not in _env(result.container)
    assert result.container.linux.resources.cpu.shares.value != 777
    assert knobs.seen[-1]["dry_run"] is True
    line = next(r for r in caplog.records if r.getMessage() == "shadow webhook call"
                and getattr(r, "event", "") == "CreateContainer")
    assert '"POLICY"' in line.would_adjust and "777" in line.would_adjust  # type: ignore[attr-defined]


async def test_control_api_updates_state_health_and_metrics(
        runtime: SimulatedRuntime, workdir: Path) -> None:
    pod, container = pod_and_container()
    runtime.state.seed([pod], [container])
    async with running_bridge(runtime, [webhook(workdir / "policy.sock")], workdir) as bridge:
        transport = httpx.AsyncHTTPTransport(uds=str(bridge.control_sock))
        async with httpx.AsyncClient(transport=transport, base_url="http://bridge",
                                     timeout=5) as client:
            assert (await client.get("/healthz")).status_code == 200
            assert (await client.get("/readyz")).json() == {"ready": True, "stuck_calls": []}
            state = (await client.get("/v1/state")).json()
            assert [c["id"] for c in state["containers"]] == [container.id]
            update = {"container_id": container.id,
                      "linux": {"resources": {"cpu": {"cpus": "0-1", "shares": 300}}}}
            reply = await client.post("/v1/updates", json={"update": [update]})
            assert reply.status_code == 200 and reply.json() == {"failed": []}
            bad = await client.post("/v1/updates", json={"update": [
                {**update, "linux": {"resources": {"cpu": {"cpus": "1-0"}}}}]})
            assert bad.status_code == 400 and "invalid range" in bad.json()["error"]
            unknown = await client.post("/v1/updates", json={"update": [
                {**update, "container_id": "feedface"}]})
            assert unknown.status_code == 400
            assert "unknown container" in unknown.json()["error"]
            metrics = (await client.get("/metrics")).text
    assert [u.container_id for u in runtime.updates] == [container.id]
    assert runtime.state.containers[container.id].linux.resources.cpu.cpus == "0-1"
    assert "nri_webhook_bridge_connected 1.0" in metrics
    assert 'nri_webhook_bridge_webhook_circuit_state{webhook="policy"} 0.0' in metrics
    assert 'nri_webhook_bridge_unsolicited_updates_total{result="sent"} 1.0' in metrics


async def test_control_socket_is_not_world_accessible(runtime: SimulatedRuntime,
                                                      workdir: Path) -> None:
    async with running_bridge(runtime, [webhook(workdir / "policy.sock")], workdir) as bridge:
        assert bridge.control_sock.stat().st_mode & 0o777 == 0o660


async def test_late_synchronize_updates_are_delivered_afterwards(workdir: Path) -> None:
    pods, containers = synthetic_state(2, 3)
    target = containers[0].id
    knobs = Knobs(
        replies={"Synchronize": {"update": [
            {"container_id": target, "linux": {"resources": {"cpu": {"shares": 123}}}}]}},
        delay_s={"Synchronize": 0.8})
    rt = serve_cri(SimulatedRuntime(workdir / "nri.sock", "containerd-2.1.9",
                                    request_timeout_s=0.5), workdir / "cri.sock")
    rt.state.seed(pods, containers)
    await rt.start()
    hook = webhook(workdir / "policy.sock", events=["Synchronize"], sync_timeout="3s")
    try:
        async with serve_policy(str(workdir / "policy.sock"), knobs), \
                running_bridge(rt, [hook], workdir):
            await until(lambda: rt.updates, what="the runtime receives the updates",
                        timeout_s=30)
    finally:
        await rt.stop()
    assert rt.closed_plugins == []
    assert rt.sync_updates == []  # the runtime was answered in time, without them
    assert [u.container_id for u in rt.updates] == [target]
    # containerd 2.1.9 can deadlock on UpdateContainers: they came through CRI.
    assert rt.cri_updates == rt.updates and rt.unsafe_updates == []
    assert rt.state.containers[target].linux.resources.cpu.shares.value == 123
    sent = next(b for b in knobs.seen if b["event"] == "Synchronize")
    assert sent["budget_ms"] == 3000
    assert len(sent["pods"]) == 2 and len(sent["containers"]) == 3
