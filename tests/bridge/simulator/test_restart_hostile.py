"""Runtime restarts and hostile frames from the runtime side (docs/protocol.md#external-plugins,
docs/protocol.md#hostile-input)."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path

import pytest

from bridge.nri.handler_api import Handler
from bridge.proto.nri import api_pb2 as api
from bridge.simulator import SimulatedRuntime
from bridge.simulator.hostile import (
    BOGUS_METHOD,
    BOGUS_SERVICE,
    probe_plugin,
    send_oversized_mux_frame,
)
from bridge.simulator.synthetic import synthetic_state
from bridge.wire.status import Code

from .harness import connected


def _mode(path: Path) -> int | None:
    try:
        return path.lstat().st_mode
    except FileNotFoundError:
        return None


def _plant_regular_file(path: Path) -> None:
    path.parent.mkdir(parents=True)
    path.write_text("not a socket")


@pytest.mark.timeout(10)
async def test_socket_lifecycle(sock_path: Path) -> None:
    _plant_regular_file(sock_path)  # only a stale *socket* is deleted; this makes bind fail
    runtime = SimulatedRuntime(sock_path)
    with pytest.raises(OSError):
        await runtime.start()
    sock_path.unlink()  # noqa: ASYNC240 - a test, no event loop work to block
    await runtime.start()
    assert stat.S_ISSOCK(_mode(sock_path) or 0)
    await runtime.stop()
    assert _mode(sock_path) is None  # removed on stop
    nested = sock_path.parent / "sub" / "nri.sock"
    fresh = SimulatedRuntime(nested)
    await fresh.start()
    assert stat.S_IMODE(_mode(nested.parent) or 0) == 0o700  # parent created 0700
    await fresh.stop()


@pytest.mark.timeout(10)
async def test_runtime_restart_reconnects_reregisters_resyncs(
        sock_path: Path, pod_and_container: tuple[api.PodSandbox, api.Container]) -> None:
    pod, container = pod_and_container
    async with connected(sock_path, Handler()) as h:
        first = h.conn
        assert (await h.runtime.create_container(pod, container)).ok
        await h.runtime.stop()
        assert not first.is_active and h.runtime.closed_plugins == []
        # The restarted runtime knows the container created before, plus new state.
        h.runtime.state.seed(*synthetic_state(2, 3))
        await h.runtime.start()
        second = await h.runtime.wait_plugin(5)
        assert second is not first and second.label == "10-test"
        assert h.runner.reconnects >= 1
        assert container.id in h.runner.cache.containers  # re-synchronized
        assert len(h.runner.cache.containers) == 4
        assert (await h.runtime.run_event("StartContainer", pod, container)).ok
        assert h.runtime.closed_plugins == []


@pytest.mark.timeout(10)
async def test_hostile_frames_are_survived(
        sock_path: Path, pod_and_container: tuple[api.PodSandbox, api.Container]) -> None:
    pod, container = pod_and_container
    async with connected(sock_path, Handler(), "nri-v0.12") as h:
        outcomes = {o.probe: o for o in await probe_plugin(h.conn)}
        assert [name for name, o in outcomes.items() if not o.ok] == []
        assert (outcomes["unknown-service"].code, outcomes["unknown-service"].message) == (
            Code.UNIMPLEMENTED, f"service {BOGUS_SERVICE}")
        assert (outcomes["unknown-method"].code, outcomes["unknown-method"].message) == (
            Code.UNIMPLEMENTED, f"method {BOGUS_METHOD}")
        assert outcomes["even-stream-id"].code == Code.INVALID_ARGUMENT
        assert outcomes["even-stream-id"].message.startswith("StreamID must be odd")
        assert outcomes["garbage-envelope"].code == Code.INVALID_ARGUMENT
        assert outcomes["garbage-payload"].code == Code.INTERNAL
        assert outcomes["unknown-event"].code == Code.OK
        assert outcomes["fragmented-request"].code == Code.OK
        assert outcomes["oversized-request"].code == Code.RESOURCE_EXHAUSTED
        assert len(outcomes) == 12
        # Still the same, working connection.
        assert h.conn.is_active and h.runtime.lost_plugins == []
        result = await h.runtime.create_container(pod, container)
        assert result.ok and h.runtime.closed_plugins == []


@pytest.mark.timeout(10)
async def test_oversized_mux_frame_makes_plugin_close_and_reconnect(
        sock_path: Path, pod_and_container: tuple[api.PodSandbox, api.Container]) -> None:
    pod, container = pod_and_container
    async with connected(sock_path, Handler()) as h:
        first = h.conn
        send_oversized_mux_frame(first)
        assert first.trunk is not None
        await asyncio.wait_for(first.trunk.wait_closed(), 5)  # a hang bound
        assert [name for name, _ in h.runtime.lost_plugins] == ["10-test"]
        second = await h.runtime.wait_plugin(5)
        assert second is not first and second.is_active
        assert (await h.runtime.create_container(pod, container)).ok
