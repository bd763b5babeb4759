"""Huge Synchronize against the bridge, with the bridge's own allocations measured (protocol
docs/protocol.md#synchronize, docs/protocol.md#size-limits).

10,000 containers (about 21 MiB of state) reach the bridge the way containerd 2.1.9 sends them,
split into `more` chunks of at most 4 MiB; then 6,000 containers (about 12.5 MiB) arrive the way
1.7.24 sends them, as one oversized ttrpc message. Both are served; re-synchronizing replaces the
old state instead of adding to it.

How memory is measured, and why not RSS: an earlier version of this test bounded the bridge
process's RSS and failed under load (RSS depends on when the allocator returns pages and on
when garbage is collected, which scheduling moves). Here the bridge runs in this process and
every runtime is a separate simulator process (`python -m bridge.simulator.commands`), so
tracemalloc, after a full garbage collection, counts exactly the Python memory the bridge still
holds: the same input gives the same number. (upb keeps message contents in C arenas that
tracemalloc does not see; the message objects, ids and tables the bridge keeps are Python
objects and are seen, so holding a second copy of the state shows up in full.)
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bridge.nri.runner import Backoff, PluginRunner
from bridge.nri.session import PluginIdentity
from bridge.nri.static import StaticHandler, StaticSettings
from bridge.nri.stub import new_plugin
from bridge.proto.nri import api_pb2 as api
from bridge.simulator.synthetic import synthetic_state
from bridge.wire import ttrpc
from tests.waiting import until

pytestmark = [pytest.mark.processes, pytest.mark.timeout(120)]
PODS, CONTAINERS = 500, 10_000
OLD_PODS, OLD_CONTAINERS = 300, 6_000
# Margins. A re-sync that kept the old state would add 100% of the held state per re-sync;
# re-syncing twice may add at most 10% (the state is rebuilt from equal input, so the
# difference is a few dictionary resizes and log records). After the smaller 1.7.24 sync the
# bridge holds 60% of the objects; 75% allows for tables that do not shrink.
RESYNC_GROWTH = 0.10
SMALLER_STATE_SHARE = 0.75
# Each container the bridge tracks costs at least its message object and its id string.
MIN_BYTES_PER_CONTAINER = 100


def held_bytes() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


@pytest.fixture
def traced() -> Iterator[None]:
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()


class Runtime:
    """One simulated runtime process (`--hold`): it synchronizes the bridge and stays connected
    until its standard input is closed."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def start(cls, sock: Path, profile: str, pods: int, containers: int) -> Runtime:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bridge.simulator.commands", "--socket", str(sock),
            "--profile", profile, "--sync-pods", str(pods), "--sync-containers",
            str(containers), "--request-timeout-ms", "20000", "--wait-plugin-s", "60",
            "--json", "--hold", stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        return cls(proc)

    async def finish(self) -> dict[str, Any]:
        """Close its input, wait for it to exit; its JSON report."""
        out, err = await self.proc.communicate(b"")
        assert self.proc.returncode == 0, err.decode()[-2000:]
        report: dict[str, Any] = json.loads(out)
        assert report["plugin"]["name"] == "40-hardening"
        return report


async def synchronized(runner: PluginRunner, runtime: Runtime, containers: int) -> None:
    """Wait until the bridge serves `runtime` with `containers` containers in its view."""
    await until(lambda: runner.ready and len(runner.cache.containers) == containers,
                what=f"the bridge serves {containers} containers", timeout_s=60,
                interval_s=0.05, proc=runtime.proc)


async def sync_once(runner: PluginRunner, sock: Path, profile: str, pods: int,
                    containers: int) -> tuple[int, dict[str, Any]]:
    """Synchronize the bridge from a new runtime; bytes the bridge holds meanwhile, report."""
    runtime = await Runtime.start(sock, profile, pods, containers)
    try:
        await synchronized(runner, runtime, containers)
        assert len(runner.cache.pods) == pods
        held = held_bytes()
    finally:
        report = await runtime.finish()
    assert report["plugin"]["sync_objects"] == [pods, containers]
    return held, report


async def test_huge_syncs_are_served_and_resyncs_replace_state(workdir: Path,
                                                               traced: None) -> None:
    sock = workdir / "nri.sock"
    pods, containers = synthetic_state(PODS, CONTAINERS)
    state_kb = api.SynchronizeRequest(pods=pods, containers=containers).ByteSize() // 1024
    del pods, containers
    assert state_kb > 4 * (ttrpc.MAX_MESSAGE_BYTES // 1024)
    runner = new_plugin(PluginIdentity("hardening", "40"), StaticHandler(StaticSettings()),
                          socket_path=str(sock), backoff=Backoff(0.05, 2.0, 0.2))
    task = asyncio.create_task(runner.run(), name="hardening:runner")
    try:
        # Up and retrying (its counter, not a sleep): no runtime yet.
        await until(lambda: runner.reconnects >= 1, what="the runner retries", timeout_s=30,
                    interval_s=0.01)
        baseline = held_bytes()
        after_first, first = await sync_once(runner, sock, "containerd-2.1.9", PODS, CONTAINERS)
        chunks = first["plugin"]["sync_chunks"]
        assert chunks >= state_kb // (ttrpc.MAX_MESSAGE_BYTES // 1024)  # really split at 4 MiB
        for _ in range(2):  # runtime restarts: the whole state again, twice
            after_resyncs, again = await sync_once(runner, sock, "containerd-2.1.9", PODS,
                                                   CONTAINERS)
            assert again["plugin"]["sync_chunks"] == chunks
        after_unsplit, old = await sync_once(runner, sock, "containerd-1.7.24", OLD_PODS,
                                             OLD_CONTAINERS)
        assert old["plugin"]["sync_chunks"] == 1  # one message above 4 MiB, as NRI v0.6 sends it
    finally:
        await runner.stop(grace_s=0.5)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    state = after_first - baseline
    print(f"state {state_kb} KiB on the wire in {chunks} chunks; bridge holds (tracemalloc) "
          f"{state // 1024} KiB after the sync, {(after_resyncs - baseline) // 1024} KiB after "
          f"2 re-syncs, {(after_unsplit - baseline) // 1024} KiB after the 1.7.24 sync")
    assert state >= CONTAINERS * MIN_BYTES_PER_CONTAINER  # the measure sees the state
    assert after_resyncs - after_first <= RESYNC_GROWTH * state  # replaced, not accumulated
    assert after_unsplit - baseline <= SMALLER_STATE_SHARE * state
