"""A call of ours the runtime never answers is visible: log line, metric, /readyz detail.

The deadlock of issue 32, played for real: a handler that awaits UpdateContainers inside an
event (what the bridge must never do) waits for the runtime's NRI lock, which the runtime
holds until that event is answered. The call watch (threshold 0.2 s here) reports it through
the real control app and metrics; stopping the runtime (the runbook's "restart containerd")
ends the call, and one more line says it returned.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import httpx
import pytest

from bridge.app import control_deps, watch_runner
from bridge.call_watch import CallWatch, StuckCall
from bridge.control.api import create_control_app
from bridge.metrics import BridgeMetrics
from bridge.nri.handler_api import EventContext, Handler
from bridge.nri.runner import PluginRunner
from bridge.nri.update_routes import UpdateSettings
from bridge.proto.nri import api_pb2 as api
from tests.bridge.simulator.harness import connected, cri_socket_beside
from tests.bridge.simulator.test_updates_concurrency import cpu_update, seed_two
from tests.waiting import until


class UpdatesInsideTheEvent(Handler):
    """Awaits UpdateContainers from CreateContainer: the inverse lock order of issue 32."""

    def __init__(self) -> None:
        self.runner: PluginRunner | None = None
        self.target = ""

    async def create_container(self, ctx: EventContext, req: api.CreateContainerRequest,
                               ) -> api.CreateContainerResponse | None:
        assert self.runner is not None
        await self.runner.update_containers([cpu_update(self.target, 512)])
        return None


@pytest.mark.timeout(60)
@pytest.mark.parametrize("route", ["nri", "cri"])
async def test_a_deadlocked_update_is_logged_once_counted_and_shown_in_readyz(
        sock_path: Path, pod_and_container: tuple[api.PodSandbox, api.Container],
        caplog: pytest.LogCaptureFixture, route: str) -> None:
    """Either route waits for the lock the event holds: NRI UpdateContainers directly, CRI
    UpdateContainerResources through the runtime's own UpdateContainer event."""
    handler = UpdatesInsideTheEvent()
    calls = CallWatch(stuck_after_s=0.2)
    # The runtime's deadline is far away: only stopping the runtime ends this deadlock.
    async with connected(sock_path, handler, seed=seed_two, calls=calls,
                         updates=UpdateSettings(route=route, cri_socket=str(
                             cri_socket_beside(sock_path))),
                         request_timeout_s=600) as h:
        handler.runner = h.runner
        handler.target = next(iter(h.runtime.state.containers))
        name, detail = (("UpdateContainers", "1 containers") if route == "nri"
                        else ("UpdateContainerResources", handler.target))
        metrics = BridgeMetrics()
        watch_runner(metrics, h.runner)
        app = create_control_app(control_deps(h.runner, metrics))
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                   base_url="http://bridge")
        with caplog.at_level(logging.INFO, logger="bridge.call_watch"):
            event = asyncio.create_task(h.runtime.create_container(*pod_and_container))
            [stuck] = await until(calls.stuck, what=f"{name} is stuck", timeout_s=30)
            assert (stuck.call, stuck.detail) == (name, detail)
            ready = await client.get("/readyz")
            assert ready.status_code == 200  # registered and serving: the status is unchanged
            body = ready.json()
            assert body["ready"] is True
            [shown] = body["stuck_calls"]
            assert StuckCall(**shown).call == name
            assert shown["detail"] == detail and shown["seconds"] >= 0.2
            text = (await client.get("/metrics")).text
            assert f'nri_webhook_bridge_runtime_calls_stuck{{call="{name}"}} 1.0' in text
            assert ('nri_webhook_bridge_runtime_calls_became_stuck_total'
                    f'{{call="{name}"}} 1.0') in text
            assert ('nri_webhook_bridge_runtime_calls_stuck{call="RegisterPlugin"} 0.0'
                    in text)
            await h.runtime.stop()  # "restart containerd": the connection and the call end
            await until(lambda: not calls.stuck(), what="the stuck call ended", timeout_s=30)
            await asyncio.gather(event, return_exceptions=True)
            await client.aclose()
    warnings = [r for r in caplog.records
                if r.name == "bridge.call_watch" and r.levelno == logging.WARNING]
    [warning] = warnings  # one line, though /readyz and /metrics looked at the call again
    assert warning.getMessage().startswith(f"runtime call {name} has not returned")
    returned = [r for r in caplog.records if r.name == "bridge.call_watch"
                and r.getMessage() == "runtime call returned after being stuck"]
    assert len(returned) == 1 and returned[0].call == name  # type: ignore[attr-defined]
    assert {k: v for k, v in calls.became_stuck.items() if v} == {name: 1}


@pytest.mark.timeout(60)
async def test_readyz_lists_no_stuck_call_when_updates_are_answered(sock_path: Path) -> None:
    # Answered calls are never stuck; the threshold is far above what a busy machine takes to
    # answer one (0.2 s was crossed under load), the stuck cases above use their own.
    calls = CallWatch(stuck_after_s=10.0)
    async with connected(sock_path, Handler(), seed=seed_two, calls=calls) as h:
        running = next(iter(h.runtime.state.containers))
        assert (await h.runner.update_containers([cpu_update(running, 999)])).failed == []
        metrics = BridgeMetrics()
        watch_runner(metrics, h.runner)
        app = create_control_app(control_deps(h.runner, metrics))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://bridge") as client:
            ready = await client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {"ready": True, "stuck_calls": []}
    assert calls.became_stuck == {"RegisterPlugin": 0, "UpdateContainers": 0,
                                  "UpdateContainerResources": 0, "CRI Version": 0}
