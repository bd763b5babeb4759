"""Benchmark: CreateContainer round trips from the runtime simulator to the bridge.

No webhook is involved: the bridge runs its built-in static handler, which
answers every CreateContainer with a small fixed adjustment (one env var and
cpu.shares). By default the bridge is a separate process started with
`python -m bridge run`, which is how it runs on a node; `--mode inprocess`
runs the same handler in the simulator's event loop (useful with
`--cprofile` to see where the time goes).

    .venv/bin/python benchmarks/bench_core.py                     # 5000 events after 500 warm-up
    .venv/bin/python benchmarks/bench_core.py --mode inprocess --cprofile /tmp/core.prof

Target on a 2-core machine: p50 <= 400 µs, p99 <= 2 ms (`--check` exits 1 if missed).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import os
import platform
import pstats
import shutil
import signal
import sys
import tempfile
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bridge.nri.runner import PluginRunner  # noqa: E402
from bridge.nri.session import PluginIdentity  # noqa: E402
from bridge.nri.static import StaticHandler, StaticSettings  # noqa: E402
from bridge.nri.stub import new_plugin  # noqa: E402
from bridge.simulator import PROFILES, BenchResult, SimulatedRuntime, run_bench  # noqa: E402

TARGET_P50_S = 400e-6
TARGET_P99_S = 2e-3
STATIC = {"adjust": {"env": [{"key": "BENCH", "value": "1"}],
                     "linux": {"resources": {"cpu": {"shares": 512}}}}}  # webhook JSON shape


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return (f"{cpu}, {os.cpu_count()} CPUs, Linux {platform.release()}, "
            f"Python {platform.python_version()}")


@contextlib.asynccontextmanager
async def bridge_process(socket_path: Path, workdir: Path,
                         ) -> AsyncIterator[asyncio.subprocess.Process]:
    config = workdir / "bench.yaml"
    config.write_text(json.dumps({"static": STATIC}))  # JSON is YAML
    with (workdir / "bridge.log").open("wb") as log:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bridge", "run", "--nri-socket", str(socket_path),
            "--plugin-name", "bench", "--plugin-index", "10", "--config", str(config),
            "--log-level", "warning", cwd=REPO, stdout=log, stderr=asyncio.subprocess.STDOUT)
        try:
            yield proc
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)  # by PID: only the process we started
                try:
                    await asyncio.wait_for(proc.wait(), 5)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()


@contextlib.asynccontextmanager
async def bridge_inprocess(socket_path: Path) -> AsyncIterator[PluginRunner]:
    settings = StaticSettings.parse(STATIC)
    runner = new_plugin(PluginIdentity("bench", "10"), StaticHandler(settings),
                          socket_path=str(socket_path))
    task = asyncio.create_task(runner.run())
    try:
        yield runner
    finally:
        await runner.stop(grace_s=0.2)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def bench(args: argparse.Namespace, workdir: Path) -> tuple[BenchResult, str]:
    socket_path = workdir / "nri.sock"
    runtime = SimulatedRuntime(socket_path, PROFILES[args.profile],
                               serialize_events=args.concurrency == 1)
    await runtime.start()
    try:
        bridge: contextlib.AbstractAsyncContextManager[Any] = (
            bridge_process(socket_path, workdir) if args.mode == "subprocess"
            else bridge_inprocess(socket_path))
        async with bridge:
            conn = await runtime.wait_plugin(30)
            profiler = cProfile.Profile() if args.cprofile else None
            if args.warmup:
                await run_bench(runtime, args.warmup, args.concurrency)
            if profiler is not None:
                profiler.enable()
            result = await run_bench(runtime, args.events, args.concurrency)
            if profiler is not None:
                profiler.disable()
                profiler.dump_stats(args.cprofile)
            dropped = runtime.closed_plugins or runtime.lost_plugins
            if dropped:
                raise SystemExit(f"plugin dropped during the benchmark: {dropped}")
            return result, conn.label
    finally:
        await runtime.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--profile", choices=sorted(PROFILES), default="containerd-2.1.9")
    parser.add_argument("--mode", choices=("subprocess", "inprocess"), default="subprocess")
    parser.add_argument("--cprofile", metavar="FILE", help="profile the measured phase")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--check", action="store_true", help="exit 1 if the target is missed")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="nri-bench-"))
    try:
        result, plugin = asyncio.run(bench(args, workdir))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    met = result.p50_s <= TARGET_P50_S and result.p99_s <= TARGET_P99_S and not result.errors
    report = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"), "machine": machine(),
        "command": " ".join([Path(sys.executable).name, *sys.argv]), "mode": args.mode,
        "profile": args.profile, "plugin": plugin, "warmup": args.warmup,
        **result.to_dict(), "target_met": met,
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{report['date']}  {report['machine']}")
        print(f"bridge {args.mode} ({plugin}), simulated {args.profile}, warm-up {args.warmup}")
        print(result.format())
        print(f"target p50 <= {TARGET_P50_S * 1e6:.0f} µs, p99 <= {TARGET_P99_S * 1e6:.0f} µs: "
              f"{'met' if met else 'MISSED'}")
    if args.cprofile:
        stats = pstats.Stats(args.cprofile, stream=sys.stderr)
        stats.sort_stats("tottime").print_stats(25)
    return 1 if (args.check and not met) or result.errors else 0


if __name__ == "__main__":
    sys.exit(main())
