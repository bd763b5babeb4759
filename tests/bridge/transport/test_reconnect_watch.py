"""Fast reconnect: the bridge notices the runtime's socket coming back instead of
waiting out its backoff, and re-policies what was created meanwhile at Synchronize."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from bridge.nri.handler_api import EventContext, Handler
from bridge.nri.runner import Backoff
from bridge.nri.session import PluginIdentity
from bridge.nri.stub import new_plugin
from bridge.proto.nri import api_pb2 as api
from bridge.simulator import SimulatedRuntime
from bridge.simulator.synthetic import synthetic_state
from bridge.transport.socket_watch import socket_identity, wait_for_new_socket
from tests.bridge.simulator.harness import assert_no_leaked_tasks

# A backoff no test run could wait out: reconnecting well inside it proves the watch.
SLOW_BACKOFF = Backoff(initial_s=60.0, factor=1.0, max_s=60.0)


class SyncPolicy(Handler):
    """Gives every container it is told about at Synchronize cpu shares 333."""

    def __init__(self) -> None:
        self.synced: list[set[str]] = []

    async def synchronize(self, ctx: EventContext, pods: Sequence[api.PodSandbox],
                          containers: Sequence[api.Container]) -> list[api.ContainerUpdate]:
        self.synced.append({c.id for c in containers})
        updates = []
        for container in containers:
            update = api.ContainerUpdate(container_id=container.id)
            update.linux.resources.cpu.shares.value = 333
            updates.append(update)
        return updates


@pytest.mark.timeout(30)
async def test_reconnects_when_the_socket_reappears_not_after_the_backoff(
        sock_path: Path) -> None:
    runtime = SimulatedRuntime(sock_path, "containerd-2.1.9")
    await runtime.start()
    handler = SyncPolicy()
    runner = new_plugin(PluginIdentity("test", "10"), handler, socket_path=str(sock_path),
                          backoff=SLOW_BACKOFF)
    task = asyncio.create_task(runner.run(), name="test:runner")
    try:
        first = await runtime.wait_plugin(5)
        assert handler.synced == [set()]
        await runtime.stop()  # the runtime goes away: socket removed
        # While the bridge is away, the restarted runtime got pods and containers.
        pods, containers = synthetic_state(2, 3)
        runtime.state.seed(pods, containers)
        await runtime.start()  # a new socket at the same path
        loop = asyncio.get_running_loop()
        started = loop.time()
        second = await runtime.wait_plugin(20)  # far inside the 48-60 s backoff
        print(f"reconnected {loop.time() - started:.3f} s after the socket reappeared")
        assert second is not first
        # Re-policied at the next Synchronize: every container created while away.
        assert handler.synced[-1] == {c.id for c in containers}
        assert {u.container_id for u in runtime.sync_updates} == {c.id for c in containers}
        for container in containers:
            assert runtime.state.containers[container.id].linux.resources.cpu.shares.value == 333
    finally:
        await runner.stop(grace_s=0.2)
        await runtime.stop()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await assert_no_leaked_tasks()


async def test_the_wait_ignores_the_socket_it_already_tried(sock_path: Path) -> None:
    runtime = SimulatedRuntime(sock_path)
    await runtime.start()
    try:
        seen = socket_identity(str(sock_path))
        assert seen is not None
        # The same socket (e.g. a runtime that refused us) does not end the wait early.
        assert await wait_for_new_socket(str(sock_path), seen, 0.3, poll_s=0.05) is False
        # Any socket ends a wait that started with none.
        assert await wait_for_new_socket(str(sock_path), None, 5.0) is True
    finally:
        await runtime.stop()
    assert socket_identity(str(sock_path)) is None
    sock_path.parent.joinpath("plain").write_text("x")
    assert socket_identity(str(sock_path.parent / "plain")) is None  # not a socket
