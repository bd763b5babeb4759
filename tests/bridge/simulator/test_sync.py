"""Synchronize: split into `more` chunks above 4 MiB (v0.7+), one oversized message on v0.6."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from bridge.nri.handler_api import EventContext, Handler
from bridge.proto.nri import api_pb2 as api
from bridge.simulator import SimulatedRuntime
from bridge.simulator.state import RuntimeState
from bridge.simulator.synthetic import synthetic_state
from bridge.wire import envelope

from .harness import RawPlugin, assert_no_leaked_tasks, connected

BIG = {"pods": 100, "containers": 3000, "annotation_bytes": 2048}  # about 12 MiB of state
# These tests are about how 12 MiB of state travels, not about time: building, encoding and
# decoding it takes seconds on a busy 2-core machine, more than the runtime's default 2 s
# request timeout, so the big ones give the runtime and the wait room (the deadline itself is
# tested elsewhere, on loop time).
ROOMY_S = 30.0


class SyncUpdater(Handler):
    """Answers Synchronize with one update for the first container it is given."""

    def __init__(self) -> None:
        self.synced: tuple[int, int] | None = None

    async def synchronize(self, ctx: EventContext, pods: Sequence[api.PodSandbox],
                          containers: Sequence[api.Container]) -> list[api.ContainerUpdate]:
        self.synced = (len(pods), len(containers))
        update = api.ContainerUpdate(container_id=containers[0].id)
        update.linux.resources.cpu.shares.value = 777
        return [update]


def seed_big(runtime: SimulatedRuntime) -> None:
    runtime.state.seed(*synthetic_state(BIG["pods"], BIG["containers"],
                                        annotation_bytes=BIG["annotation_bytes"]))


@pytest.mark.timeout(120)
async def test_split_sync_above_4mib(sock_path: Path) -> None:
    handler = SyncUpdater()
    async with connected(sock_path, handler, "containerd-2.1.9", seed=seed_big,
                         wait_s=2 * ROOMY_S, request_timeout_s=ROOMY_S,
                         registration_timeout_s=ROOMY_S) as h:
        assert h.conn.sync_chunks >= 3  # 12 MiB cannot go in fewer than three 4 MiB chunks
        assert h.runtime.closed_plugins == []
        assert handler.synced == (BIG["pods"], BIG["containers"])  # buffered until more=false
        assert len(h.runner.cache.containers) == BIG["containers"]
        first = next(iter(h.runtime.state.containers.values()))
        assert [u.container_id for u in h.runtime.sync_updates] == [first.id]
        assert first.linux.resources.cpu.shares.value == 777  # sync updates are applied


@pytest.mark.timeout(120)
async def test_v0_6_sends_one_oversized_sync(sock_path: Path) -> None:
    handler = SyncUpdater()
    async with connected(sock_path, handler, "containerd-1.7.24", seed=seed_big,
                         wait_s=2 * ROOMY_S, request_timeout_s=ROOMY_S,
                         registration_timeout_s=ROOMY_S) as h:
        # Never split: one message of ~12 MiB (legal for old ttrpc, up to 16 MiB).
        assert h.conn.sync_chunks == 1
        assert h.runtime.closed_plugins == []
        assert handler.synced == (BIG["pods"], BIG["containers"])


@pytest.mark.timeout(10)
async def test_small_sync_is_one_message(sock_path: Path) -> None:
    def seed(runtime: SimulatedRuntime) -> None:
        runtime.state.seed(*synthetic_state(3, 10))

    async with connected(sock_path, Handler(), "containerd-2.1.9", seed=seed) as h:
        assert h.conn.sync_chunks == 1
        assert len(h.runner.cache.pods) == 3 and len(h.runner.cache.containers) == 10


@pytest.mark.timeout(120)
async def test_wrong_answer_to_intermediate_chunk_closes_plugin(sock_path: Path) -> None:
    async def always_final(request: envelope.Request) -> bytes:
        return api.SynchronizeResponse(more=False).SerializeToString()  # breaks the split rule

    plugin = RawPlugin(sock_path, {"Synchronize": always_final})
    runtime = SimulatedRuntime(sock_path, "containerd-2.1.9",
                               request_timeout_s=ROOMY_S, registration_timeout_s=ROOMY_S)
    seed_big(runtime)
    await runtime.start()
    try:
        await plugin.connect()
        await plugin.register()
        assert plugin.trunk is not None
        await plugin.trunk.wait_closed()
        assert runtime.closed_plugins == [("05-raw", "plugin does not handle split sync requests")]
        assert len(plugin.called("Synchronize")) == 1
        assert runtime.plugins == []
    finally:
        await plugin.close()
        await runtime.stop()
        await assert_no_leaked_tasks()


@pytest.mark.timeout(10)
async def test_v0_6_sync_above_16mib_fails_and_closes(sock_path: Path) -> None:
    plugin = RawPlugin(sock_path)
    runtime = SimulatedRuntime(sock_path, "containerd-1.7.24")
    runtime.state.seed(*synthetic_state(10, 3000, annotation_bytes=5000))  # ~21 MiB
    await runtime.start()
    try:
        await plugin.connect()
        await plugin.register()
        assert plugin.trunk is not None
        await plugin.trunk.wait_closed()
        [(name, reason)] = runtime.closed_plugins
        assert name == "05-raw" and "exceeds 16777216 bytes" in reason
        assert plugin.called("Synchronize") == []  # nothing was written
    finally:
        await plugin.close()
        await runtime.stop()
        await assert_no_leaked_tasks()


@pytest.mark.timeout(10)
async def test_a_replaced_state_is_what_synchronize_sends_and_updates_change(
        sock_path: Path) -> None:
    # bench_node_scale gives the runtime a store of its own (one that writes a runc tree) after
    # construction: Synchronize and the sync updates must use that one, not the first.
    def seed(runtime: SimulatedRuntime) -> None:
        replaced = RuntimeState(runtime.profile.runtime)
        replaced.seed(*synthetic_state(2, 4))
        runtime.state = replaced

    handler = SyncUpdater()
    async with connected(sock_path, handler, "containerd-2.1.9", seed=seed) as h:
        assert handler.synced == (2, 4)
        first = next(iter(h.runtime.state.containers.values()))
        assert first.linux.resources.cpu.shares.value == 777
