"""Full lifecycle per runtime profile: simulator + the plugin core over a Unix socket."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bridge.contract.catalogue import EVENTS_BY_RPC, NriEvent
from bridge.nri.handler_api import EventContext, Handler, RuntimeInfo
from bridge.proto.nri import api_pb2 as api
from bridge.simulator import load_scenario, run_scenario
from bridge.simulator.delivery import FALLBACK_EVENTS

from .harness import connected

LIFECYCLE = ("RunPodSandbox", "CreateContainer", "PostCreateContainer", "StartContainer",
             "PostStartContainer", "UpdateContainer", "PostUpdateContainer", "StopContainer",
             "RemoveContainer", "StopPodSandbox", "RemovePodSandbox")


class Recorder(Handler):
    """Wants every lifecycle event; adjusts CreateContainer, bumps UpdateContainer."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, bool]] = []
        self.runtime: RuntimeInfo | None = None

    async def configure(self, runtime: RuntimeInfo) -> None:
        self.runtime = runtime

    def _note(self, ctx: EventContext) -> None:
        self.seen.append((ctx.name, ctx.via_state_change))

    async def run_pod_sandbox(self, ctx: EventContext, req: Any) -> None:
        self._note(ctx)

    async def stop_pod_sandbox(self, ctx: EventContext, req: Any) -> None:
        self._note(ctx)

    async def remove_pod_sandbox(self, ctx: EventContext, req: Any) -> None:
        self._note(ctx)

    async def create_container(self, ctx: EventContext, req: Any) -> api.CreateContainerResponse:
        self._note(ctx)
        rsp = api.CreateContainerResponse()
        rsp.adjust.env.add(key="BRIDGE", value="on")
        rsp.adjust.annotations["bridge.example.com/seen"] = "true"
        rsp.adjust.linux.resources.cpu.shares.value = 512
        rsp.adjust.linux.resources.cpu.cpus = "0-1"
        rsp.adjust.linux.resources.memory.limit.value = 128 << 20
        return rsp

    async def post_create_container(self, ctx: EventContext, req: Any) -> None:
        self._note(ctx)

    async def start_container(self, ctx: EventContext, req: Any) -> None:
        self._note(ctx)

    async def post_start_container(self, ctx: EventContext, req: Any) -> None:
        self._note(ctx)

    async def update_container(self, ctx: EventContext, req: Any) -> api.UpdateContainerResponse:
        self._note(ctx)
        update = api.ContainerUpdate(container_id=req.container.id)
        update.linux.resources.cpu.quota.value = 123000
        return api.UpdateContainerResponse(update=[update])

    async def post_update_container(self, ctx: EventContext, req: Any) -> None:
        self._note(ctx)

    async def stop_container(self, ctx: EventContext, req: Any) -> None:
        self._note(ctx)

    async def remove_container(self, ctx: EventContext, req: Any) -> None:
        self._note(ctx)


@pytest.mark.timeout(10)
@pytest.mark.parametrize(("profile", "fixture"), [
    ("containerd-1.7.24", "containerd-1.7.24-events.jsonl"),
    ("containerd-2.1.9", "containerd-2.1.9-events.jsonl"),
    ("nri-v0.12", "containerd-2.1.9-events.jsonl"),
])
async def test_recorded_lifecycle(sock_path: Path, profile: str, fixture: str) -> None:
    handler = Recorder()
    async with connected(sock_path, handler, profile) as h:
        results = await run_scenario(h.runtime, load_scenario(fixture))
        assert [r.event for r in results] == list(LIFECYCLE)
        assert all(r.ok for r in results), [r.error for r in results]
        # Delivery: old runtimes use StateChange for everything but the
        # Create/Update/Stop RPCs; a v0.12 runtime uses the dedicated RPCs.
        dedicated = profile == "nri-v0.12"
        expected = [(name, not dedicated and EVENTS_BY_RPC[name] in FALLBACK_EVENTS)
                    for name in LIFECYCLE]
        assert handler.seen == expected
        create = results[1]
        assert create.container is not None
        assert "BRIDGE=on" in create.container.env
        assert create.container.annotations["bridge.example.com/seen"] == "true"
        cpu = create.container.linux.resources.cpu
        assert (cpu.shares.value, cpu.cpus) == (512, "0-1")
        assert create.container.linux.resources.memory.limit.value == 128 << 20
        update = results[5].response
        assert isinstance(update, api.UpdateContainerResponse)
        effective = update.update[-1].linux.resources
        assert effective.cpu.quota.value == 123000  # the plugin's change
        assert effective.memory.limit.value == 100663296  # the requested resources
        assert h.runtime.closed_plugins == [] and h.runtime.lost_plugins == []
        assert h.runtime.state.containers == {} and h.runtime.state.pods == {}


@pytest.mark.timeout(10)
@pytest.mark.parametrize(("profile", "request_ms", "mask"), [
    ("containerd-1.7.24", 0, 0x07FF),
    ("containerd-2.1.9", 1500, 0x07FF),
    ("nri-v0.12", 1500, 0x3FFF & ~0x2000),
])
async def test_configure_per_profile(sock_path: Path, profile: str, request_ms: int,
                                     mask: int) -> None:
    handler = Recorder()
    async with connected(sock_path, handler, profile, request_timeout_s=1.5) as h:
        runtime = handler.runtime
        assert runtime is not None
        assert runtime.name == h.runtime.profile.runtime_name
        # Without timeouts in Configure (1.7.24), the plugin assumes the defaults.
        assert runtime.request_timeout_s == (request_ms / 1000 if request_ms else 2.0)
        # Reported (v0.12) or inferred from the runtime name and version.
        assert runtime.nri_version == h.runtime.profile.nri
        # Only events the runtime knows, and never the validator bit by accident.
        assert h.conn.events & ~mask == 0
        assert h.conn.events & NriEvent.CREATE_CONTAINER.bit


@pytest.mark.timeout(10)
async def test_koordinator_scenario_with_presynced_state(sock_path: Path) -> None:
    scenario = load_scenario("koordinator-qos")
    handler = Recorder()
    async with connected(sock_path, handler, scenario.profile or "containerd-2.1.9",
                         seed=scenario.seed) as h:
        # The pre-existing redis pod reached the plugin through Synchronize.
        assert {c.name for c in h.runner.cache.containers.values()} == {"redis"}
        results = await run_scenario(h.runtime, scenario)
        assert all(r.ok for r in results)
        names = {c.name for c in h.runtime.state.containers.values()}
        assert names == {"redis", "nginx", "api"}  # the BE worker was removed
        api_ctr = next(c for c in h.runtime.state.containers.values() if c.name == "api")
        assert api_ctr.state == api.CONTAINER_RUNNING
        assert api_ctr.linux.resources.memory.limit.value == 3 << 30  # resized
        assert api_ctr.linux.resources.cpu.quota.value == 123000  # plugin's update wins
        assert "BRIDGE=on" in api_ctr.env
