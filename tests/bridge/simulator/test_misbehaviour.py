"""What the runtime does to misbehaving plugins (docs/protocol.md#when-the-runtime-drops-a-plugin),
and the plugin core's answers."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from bridge.errors import RpcError
from bridge.nri.handler_api import EventContext, EventRejected, Handler
from bridge.proto.nri import api_pb2 as api
from bridge.simulator import SimulatedRuntime
from bridge.simulator.connection import RUNTIME_SERVICE
from bridge.simulator.synthetic import synthetic_state
from bridge.wire import envelope
from bridge.wire.status import Code

from .harness import RawPlugin, assert_no_leaked_tasks, connected, raw_connected

# The runtime's request and registration timeouts and the plugins' slowness run on the event
# loop's clock (runtime, plugin core and raw plugins share this loop): looptime moves it to the
# next timer when the loop is idle, so a 30 s handler costs no wall second and no load makes a
# deadline fire early (docs/performance.md#make-check). Durations are measured on that clock.
pytestmark = pytest.mark.looptime


class Slow(Handler):
    """Takes far longer than the request timeout and would have changed things."""

    async def create_container(self, ctx: EventContext, req: Any) -> api.CreateContainerResponse:
        await asyncio.sleep(30)
        rsp = api.CreateContainerResponse()
        rsp.adjust.env.add(key="TOO", value="late")
        return rsp


class SlowSync(Handler):
    """Computes its Synchronize updates only once the test lets it (`release`)."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def synchronize(self, ctx: EventContext, pods: Sequence[api.PodSandbox],
                          containers: Sequence[api.Container]) -> list[api.ContainerUpdate]:
        await self.release.wait()
        update = api.ContainerUpdate(container_id=containers[0].id)
        update.linux.resources.cpu.shares.value = 4242
        return [update]


class Rejecting(Handler):
    async def create_container(self, ctx: EventContext, req: Any) -> None:
        if req.container.name == "app":
            raise EventRejected("no apps today")


@pytest.mark.timeout(10)
@pytest.mark.parametrize("profile", ["containerd-1.7.24", "containerd-2.1.9"])
async def test_slow_handler_answers_in_time_and_plugin_stays(
        sock_path: Path, pod_and_container: tuple[api.PodSandbox, api.Container],
        profile: str) -> None:
    # 1.7.24 does not send request_timeout in Configure: the plugin must go by timeout_nano.
    pod, container = pod_and_container
    async with connected(sock_path, Slow(), profile, request_timeout_s=0.5) as h:
        result = await h.runtime.create_container(pod, container)
        assert result.ok and result.container is not None
        assert "TOO=late" not in result.container.env  # ... without the late change
        # The runtime's own timer is the judge: had the answer come after its deadline, it
        # would have closed the plugin (see test_silent_plugin_is_closed_and_operation_fails_open).
        assert h.runtime.closed_plugins == [] and h.conn.is_active
        assert (await h.runtime.run_event("StartContainer", pod, container)).ok


@pytest.mark.timeout(10)
async def test_slow_sync_answers_in_time_and_delivers_updates_later(sock_path: Path) -> None:
    def seed(runtime: SimulatedRuntime) -> None:
        runtime.state.seed(*synthetic_state(1, 2))

    handler = SlowSync()
    async with connected(sock_path, handler, request_timeout_s=0.5, seed=seed) as h:
        # Registered and synchronized while the handler is still held: answered in time.
        assert not handler.release.is_set()
        assert h.runtime.closed_plugins == [] and h.runtime.sync_updates == []
        handler.release.set()
        [late] = await h.runtime.wait_updates(1, timeout_s=10)  # via UpdateContainers
        assert h.runtime.state.containers[late.container_id].linux.resources.cpu.shares.value \
            == 4242


@pytest.mark.timeout(10)
async def test_silent_plugin_is_closed_and_operation_fails_open(
        sock_path: Path, pod_and_container: tuple[api.PodSandbox, api.Container]) -> None:
    pod, container = pod_and_container

    async def never(request: envelope.Request) -> bytes:
        await asyncio.sleep(30)
        return b""

    plugin = RawPlugin(sock_path, {"CreateContainer": never})
    async with raw_connected(sock_path, plugin, "containerd-2.1.9",
                             request_timeout_s=0.3) as (runtime, conn):
        loop = asyncio.get_running_loop()
        started = loop.time()
        result = await runtime.create_container(pod, container)
        # Ended by the runtime's 300 ms timer, not before and not by the plugin's 30 s (the
        # close reason below says which timer).
        assert 0.3 <= loop.time() - started < 1.0
        assert result.ok  # fail-open: the container is created without the plugin
        assert result.container is not None and result.container.id == container.id
        assert runtime.closed_plugins == [("05-raw", "CreateContainer: no response within 300 ms")]
        assert not conn.is_active and runtime.plugins == []
        assert plugin.trunk is not None
        await asyncio.wait_for(plugin.trunk.wait_closed(), 5)  # a hang bound


@pytest.mark.timeout(10)
async def test_deadline_status_from_the_plugin_is_not_fatal(
        sock_path: Path, pod_and_container: tuple[api.PodSandbox, api.Container]) -> None:
    pod, container = pod_and_container

    async def deadline(request: envelope.Request) -> bytes:
        raise RpcError(Code.DEADLINE_EXCEEDED, "my own upstream timed out")

    plugin = RawPlugin(sock_path, {"CreateContainer": deadline})
    async with raw_connected(sock_path, plugin, "containerd-2.1.9") as (runtime, conn):
        result = await runtime.create_container(pod, container)
        assert result.error == "plugin 05-raw: my own upstream timed out"
        assert conn.is_active and runtime.closed_plugins == []


@pytest.mark.timeout(10)
async def test_plugin_error_fails_the_operation_but_plugin_stays(
        sock_path: Path, pod_and_container: tuple[api.PodSandbox, api.Container]) -> None:
    pod, container = pod_and_container
    async with connected(sock_path, Rejecting()) as h:
        result = await h.runtime.create_container(pod, container)
        assert result.error == "plugin 10-test: no apps today"
        assert container.id not in h.runtime.state.containers
        assert h.runtime.closed_plugins == [] and h.conn.is_active
        other = api.Container()
        other.CopyFrom(container)
        other.id, other.name = "f" * 64, "sidecar"
        assert (await h.runtime.create_container(pod, other)).ok


@pytest.mark.timeout(10)
async def test_no_registration_within_timeout_closes(sock_path: Path) -> None:
    plugin = RawPlugin(sock_path)
    runtime = SimulatedRuntime(sock_path, "containerd-2.1.9", registration_timeout_s=0.2)
    await runtime.start()
    try:
        trunk = await plugin.connect()
        await asyncio.wait_for(trunk.wait_closed(), 5)  # a hang bound
        assert runtime.closed_plugins == [
            ("connection#1", "plugin registration timed out (200 ms)")]
    finally:
        await plugin.close()
        await runtime.stop()
        await assert_no_leaked_tasks()


@pytest.mark.timeout(10)
@pytest.mark.parametrize(("profile", "name", "index", "problem"), [
    ("containerd-2.1.9", "ok", "7", "invalid plugin index '7', must be 2 digits"),
    ("containerd-2.1.9", "", "10", "empty plugin name"),
    ("nri-v0.12", "bad name!", "10", "invalid plugin name 'bad name!'"),
])
async def test_invalid_identity_gets_error_status_and_close(
        sock_path: Path, profile: str, name: str, index: str, problem: str) -> None:
    plugin = RawPlugin(sock_path)
    runtime = SimulatedRuntime(sock_path, profile)
    await runtime.start()
    try:
        trunk = await plugin.connect()
        with pytest.raises(RpcError) as refused:
            await plugin.register(name, index)
        assert (refused.value.code, refused.value.message) == (Code.UNKNOWN, problem)
        await asyncio.wait_for(trunk.wait_closed(), 5)  # a hang bound
        assert [reason for _, reason in runtime.closed_plugins] == [
            f"invalid plugin registration: {problem}"]
        assert plugin.called("Configure") == []
    finally:
        await plugin.close()
        await runtime.stop()
        await assert_no_leaked_tasks()


@pytest.mark.timeout(10)
async def test_old_runtime_accepts_any_nonempty_name(sock_path: Path) -> None:
    plugin = RawPlugin(sock_path)
    async with raw_connected(sock_path, plugin, "containerd-2.1.9", name="bad name!") as (_, conn):
        assert conn.label == "05-bad name!"


@pytest.mark.timeout(10)
@pytest.mark.parametrize(("profile", "events"), [
    ("containerd-2.1.9", 0x0800 | 0x0008),  # UpdatePodSandbox is unknown before NRI v0.10
    ("containerd-1.7.24", 0x2000 | 0x0008),  # so is the validator bit
    ("nri-v0.12", 0x4000),  # beyond LAST even for v0.12
])
async def test_mask_with_unknown_bits_closes_plugin(sock_path: Path, profile: str,
                                                     events: int) -> None:
    plugin = RawPlugin(sock_path, events=events)
    runtime = SimulatedRuntime(sock_path, profile)
    await runtime.start()
    try:
        trunk = await plugin.connect()
        await plugin.register()
        await asyncio.wait_for(trunk.wait_closed(), 5)  # a hang bound
        [(name, reason)] = runtime.closed_plugins
        assert name == "05-raw" and reason.startswith(f"invalid event mask 0x{events:x}")
        assert plugin.called("Synchronize") == []
    finally:
        await plugin.close()
        await runtime.stop()
        await assert_no_leaked_tasks()


@pytest.mark.timeout(10)
async def test_mask_zero_subscribes_to_everything(sock_path: Path) -> None:
    plugin = RawPlugin(sock_path, events=0)
    async with raw_connected(sock_path, plugin, "nri-v0.12") as (_, conn):
        assert conn.events == 0x3FFF  # including the validator bit: avoid sending 0


@pytest.mark.timeout(10)
async def test_configure_arrives_before_register_response(sock_path: Path) -> None:
    order: list[str] = []
    plugin = RawPlugin(sock_path)
    original = plugin.methods["Configure"]

    async def configure(request: envelope.Request) -> bytes:
        order.append("Configure")
        return await original(request)

    plugin.methods["Configure"] = configure
    runtime = SimulatedRuntime(sock_path, "containerd-2.1.9")
    await runtime.start()
    try:
        trunk = await plugin.connect()
        request = api.RegisterPluginRequest(plugin_name="raw", plugin_idx="05")
        await trunk.client.call(RUNTIME_SERVICE, "RegisterPlugin", request.SerializeToString(),
                                timeout_s=2)
        order.append("RegisterPlugin response")
        await runtime.wait_plugin(5)  # a hang bound
        assert order == ["Configure", "RegisterPlugin response"]
    finally:
        await plugin.close()
        await runtime.stop()
        await assert_no_leaked_tasks()
