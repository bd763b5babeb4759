"""Huge Synchronize against the bridge process, with its RSS measured (protocol §4.4, §2.7).

10,000 containers (about 21 MiB of state) reach the bridge the way containerd
2.1.9 sends them, split into `more` chunks of at most 4 MiB; then 6,000
containers (about 12.5 MiB) arrive the way 1.7.24 sends them, as one
oversized ttrpc message. Both are served; re-synchronizing replaces the old
state instead of adding to it; the memory the bridge holds is a bounded
multiple of the state it was given.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bridge.proto.nri import api_pb2 as api
from bridge.simulator import SimulatedRuntime
from bridge.simulator.synthetic import synthetic_state
from bridge.wire import ttrpc

from .processes import bridge_process, peak_rss_kb, rss_kb

pytestmark = pytest.mark.timeout(60)
PODS, CONTAINERS = 500, 10_000
OLD_PODS, OLD_CONTAINERS = 300, 6_000
# upb keeps a parsed message in about 2.8x its wire size; the cache holds every
# pod and container, and a chunk being parsed adds to it for a moment.
STATE_FACTOR = 4
SLACK_KB = 16 << 10
RESYNC_GROWTH_KB = 8 << 10


async def _sync(runtime: SimulatedRuntime) -> int:
    await runtime.start()
    conn = await runtime.wait_plugin(30)
    assert runtime.closed_plugins == [] and conn.label == "40-hardening"
    return conn.sync_chunks


async def test_huge_syncs_are_served_and_memory_stays_bounded(workdir: Path) -> None:
    sock = workdir / "nri.sock"
    pods, containers = synthetic_state(PODS, CONTAINERS)
    state_kb = api.SynchronizeRequest(pods=pods, containers=containers).ByteSize() // 1024
    assert state_kb > 4 * (ttrpc.MAX_MESSAGE_BYTES // 1024)
    async with bridge_process(workdir, sock) as bridge:
        await bridge.wait_log("connection lost")  # up and retrying: no runtime yet
        baseline = rss_kb(bridge.pid)

        split = SimulatedRuntime(sock, "containerd-2.1.9", request_timeout_s=10)
        split.state.seed(pods, containers)
        try:
            chunks = await _sync(split)
            await bridge.wait_log(f"synchronized {PODS} pods, {CONTAINERS} containers; "
                                  "0 updates", timeout_s=30)
            after_first = rss_kb(bridge.pid)
            for _ in range(2):  # runtime restarts: the whole state again, twice
                await split.stop()
                assert await _sync(split) == chunks
            await bridge.wait_log(f"synchronized {PODS} pods, {CONTAINERS} containers; "
                                  "0 updates", count=3, timeout_s=30)
            after_resyncs = rss_kb(bridge.pid)
        finally:
            await split.stop()

        unsplit = SimulatedRuntime(sock, "containerd-1.7.24", request_timeout_s=10)
        unsplit.state.seed(pods[:OLD_PODS], containers[:OLD_CONTAINERS])
        try:
            assert await _sync(unsplit) == 1  # one message above 4 MiB, as NRI v0.6 sends it
            await bridge.wait_log(f"synchronized {OLD_PODS} pods, {OLD_CONTAINERS} containers; "
                                  "0 updates", timeout_s=30)
            after_unsplit = rss_kb(bridge.pid)
            peak = peak_rss_kb(bridge.pid)
        finally:
            await unsplit.stop()
        assert bridge.running
        code, _ = await bridge.terminate()
    assert code == 0
    assert chunks >= state_kb // (ttrpc.MAX_MESSAGE_BYTES // 1024)  # really split at 4 MiB
    print(f"state {state_kb} KiB in {chunks} chunks; RSS baseline {baseline} KiB, "
          f"after sync {after_first}, after 2 re-syncs {after_resyncs}, after the 1.7.24 "
          f"sync {after_unsplit}, peak {peak}")
    assert after_first - baseline <= STATE_FACTOR * state_kb + SLACK_KB
    assert after_resyncs - after_first <= RESYNC_GROWTH_KB  # replaced, not accumulated
    assert after_unsplit - after_resyncs <= RESYNC_GROWTH_KB
    assert peak - baseline <= STATE_FACTOR * state_kb + SLACK_KB
