"""benchmarks/bench_node_scale.py on a small node, its accounting asserted (issue 27, item 2).

The "phantom drift" of docs/performance.md was the benchmark's arithmetic, not the reconciler:
the drift counter it reported is cumulative from the policy server's start, so the one pass that
put in place what a timed-out start-up Synchronize had left undone (every BE container's
values) was divided over the measured passes and read as a tenth of the containers drifting on
every pass. The benchmark now reports that repair apart (`settling`) and the settled passes on
their own. Here the Synchronize is left out deterministically (the webhook is not subscribed to
it), as when its call fails: the reconciler must repair each BE container once and then push
nothing pass after pass. Three real processes (the simulator in the benchmark, the bridge, the
policy server); passes 1 s apart; nothing here is timed.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from .processes import REPO, Process

pytestmark = [pytest.mark.processes, pytest.mark.timeout(120)]
PODS = 20
BE_PODS = sum(1 for i in range(PODS) if i % 10 >= 7)  # the benchmark's 30 % BE pods


async def _bench(workdir: Path, *flags: str) -> dict[str, Any]:
    bench = await Process.start(
        [sys.executable, str(REPO / "benchmarks" / "bench_node_scale.py"), "--pods", str(PODS),
         "--passes", "3", "--interval", "1", "--json", *flags], workdir / "bench.out",
        own_group=True)
    try:
        code = await asyncio.wait_for(bench.proc.wait(), 100)
    finally:
        await bench.kill()
    text = bench.log_text()
    assert code == 0, text[-3000:]
    report: dict[str, Any] = json.loads(text[text.index('{\n  "date"'):])
    assert len(report["results"]) == 1
    result: dict[str, Any] = report["results"][0]
    assert result["errors"] == []
    return result


def _settled(result: dict[str, Any]) -> None:
    run = result["pass"]
    assert run["passes"] >= 3
    assert run["updates_pushed_per_pass"] == 0
    assert all(v == 0 for v in run["drift_found_per_pass"].values()), run


async def test_a_missed_synchronize_is_repaired_once_not_counted_on_every_pass(
    workdir: Path,
) -> None:
    result = await _bench(workdir, "--without-synchronize")
    assert result["synchronize"]["updates_to_runtime"] == 0
    # The first pass over the node put every BE container's values in place...
    assert result["settling"]["updates_pushed"] == BE_PODS
    assert result["settling"]["drift_found"]["container"] == BE_PODS
    # ...and the settled passes find nothing.
    _settled(result)


async def test_after_a_synchronize_the_node_is_settled(workdir: Path) -> None:
    result = await _bench(workdir, "--sync-timeout", "20s")
    sync = result["synchronize"]
    assert sync["outcomes"]["ok"] == 1
    assert sync["updates_to_runtime"] == BE_PODS
    assert result["settling"]["updates_pushed"] == 0
    _settled(result)
