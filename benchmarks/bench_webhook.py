"""Benchmark: simulator -> bridge -> uvicorn policy on a Unix socket -> back, and the Go floor.

Separate processes, as on a node: this process plays the runtime (simulator),
the bridge runs as `python -m bridge run`, and the policy runs in a third
process on a Unix socket. Every scenario answers CreateContainer with the same
change (env BENCH=1, cpu.shares 512) unless said otherwise:

- `go-floor`: no bridge; a Go plugin built from NRI's own stub library
  (benchmarks/gofloor, built from Debian packages by build.sh) is the plugin.
  The reference every other p50 is divided by;
- `no-webhook`: the bridge's built-in static handler, no webhook configured;
- `selector-miss`: the webhook's selector matches no pod: no HTTP call;
- `webhook`: a bare FastAPI (`--policy-app fastapi`) or Starlette app as the policy;
- `policy-server`: the shipped `nri-policy-server` serving a trivial SDK policy
  (benchmarks/trivial_policy.py), which answers every event with the same bytes;
- `policy-server-distinct`: the same, but each reply also annotates the container with its
  id, so no reply is ever remembered as already checked (by the server or the bridge);
- `koordinator-lsr`: the shipped server's koordinator-qos policy, the pod an LSR
  pod pinned to cpus 2-3 (the reply pins the container's cpuset).

    .venv/bin/python benchmarks/bench_webhook.py                  # all, 3000 events each
    .venv/bin/python benchmarks/bench_webhook.py --scenario policy-server --events 10000 --json

Targets (issue 12, 2-core machine): no webhook p50 <= 1.2x the Go floor; policy-server
p50 <= 600 µs, p99 <= 1.5 ms, >= 1500 events/s with one event in flight; koordinator-lsr
p50 <= 800 µs; selector miss p50 <= 1.2x no webhook. `--check` exits 1 if one is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
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

import uvicorn  # noqa: E402
from fastapi import FastAPI  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import Response  # noqa: E402
from starlette.routing import Route  # noqa: E402

from bridge.simulator import PROFILES, BenchResult, SimulatedRuntime, run_bench  # noqa: E402
from tests.waiting import accepts, until  # noqa: E402

TARGET_FLOOR_RATIO = 1.2
TARGET_P50_S = 600e-6
TARGET_P99_S = 1.5e-3
TARGET_EVENTS_PER_S = 1500.0
TARGET_KOORD_P50_S = 800e-6
TARGET_MISS_RATIO = 1.2
SCENARIOS = ("go-floor", "no-webhook", "selector-miss", "webhook", "policy-server",
             "policy-server-distinct", "koordinator-lsr")
_TRIVIAL = ["--no-koordinator", "--policy-module", str(REPO / "benchmarks" / "trivial_policy.py")]
SHIPPED = {"policy-server": ("bench", _TRIVIAL),
           "policy-server-distinct": ("bench-distinct", _TRIVIAL),
           "koordinator-lsr": ("koordinator-qos", [])}
GOFLOOR_BUILD = REPO / "benchmarks" / "gofloor" / "build.sh"
LSR_CPUSET = "2-3"
REPLY = {"adjust": {"env": [{"key": "BENCH", "value": "1"}],
                    "linux": {"resources": {"cpu": {"shares": 512}}}}}
STATIC = REPLY  # the no-webhook scenario's static adjustment: the same change
STOP_TIMEOUT_S = 5.0


# -- the policy process ---------------------------------------------------------------


def policy_app(kind: str) -> Any:
    """The benchmark policy: CreateContainer gets REPLY, anything else no change."""
    body = json.dumps(REPLY).encode()

    async def decide(raw: bytes) -> Response:
        event = json.loads(raw)["event"]
        return Response(body if event == "CreateContainer" else b"{}",
                        media_type="application/json")

    if kind == "fastapi":
        app = FastAPI()

        @app.post("/v1/policy")
        async def policy(request: Request) -> Response:
            return await decide(await request.body())

        return app

    async def raw_policy(request: Request) -> Response:
        return await decide(await request.body())

    return Starlette(routes=[Route("/v1/policy", raw_policy, methods=["POST"])])


def serve_policy(path: str, kind: str) -> None:
    """Run the benchmark policy on Unix socket `path` until SIGTERM (policy process)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    uvicorn.run(policy_app(kind), uds=path, log_level="warning", access_log=False,
                lifespan="off")


# -- orchestration ----------------------------------------------------------------------


@contextlib.asynccontextmanager
async def process(args: list[str], log_path: Path, exe: Path | None = None,
                  stop_timeout_s: float = STOP_TIMEOUT_S,
                  ) -> AsyncIterator[asyncio.subprocess.Process]:
    with log_path.open("wb") as log:
        proc = await asyncio.create_subprocess_exec(
            str(exe) if exe is not None else sys.executable, *args, cwd=REPO,
            stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=asyncio.subprocess.STDOUT)
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)  # by PID: only the process we started
            try:
                await asyncio.wait_for(proc.wait(), stop_timeout_s)
            except TimeoutError:
                proc.kill()
                await proc.wait()


def lsr_pod() -> Any:
    """The recorded pod as a koordinator LSR pod that the scheduler pinned to LSR_CPUSET."""
    from bridge.simulator.synthetic import template
    pod, _ = template()
    pod.labels["koordinator.sh/qosClass"] = "LSR"
    pod.annotations["scheduling.koordinator.sh/resource-status"] = json.dumps(
        {"cpuset": LSR_CPUSET})
    return pod


async def verify(runtime: SimulatedRuntime, scenario: str, pod: Any) -> None:
    """One event outside the measurement: did the policy's adjustment arrive (or not)?"""
    from bridge.simulator.synthetic import template
    recorded, container = template()
    container.id = "f" * 64
    result = await runtime.create_container(pod if pod is not None else recorded, container)
    runtime.state.containers.pop(container.id, None)
    ctr = result.container
    if scenario == "koordinator-lsr":
        got = ctr is not None and ctr.linux.resources.cpu.cpus == LSR_CPUSET
    else:
        got = ctr is not None and "BENCH=1" in ctr.env
    if result.error or got != (scenario != "selector-miss"):
        raise SystemExit(f"{scenario}: verification failed: error={result.error!r}, "
                         f"adjustment applied={got}")


def bridge_config(scenario: str, policy_sock: Path) -> dict[str, Any]:
    if scenario == "no-webhook":
        return {"static": STATIC}
    path = f"/v1/policies/{SHIPPED[scenario][0]}" if scenario in SHIPPED else "/v1/policy"
    hook: dict[str, Any] = {"name": "bench", "url": f"unix://{policy_sock}{path}",
                            "events": ["CreateContainer"], "timeout": "1s"}
    if scenario == "selector-miss":
        hook["namespaces"] = ["no-such-namespace"]
    return {"webhooks": [hook], "control": {"socket": None}}


def rss_mib(proc: asyncio.subprocess.Process) -> float | None:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return None


def cpu_s(proc: asyncio.subprocess.Process | None) -> float:
    """User + system CPU seconds used so far by `proc` (None: this process)."""
    if proc is None:
        t = os.times()
        return t.user + t.system
    fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def go_floor_binary() -> Path | None:
    """Build (once) and return the Go floor plugin; None, saying why, if it cannot be built."""
    import subprocess
    done = subprocess.run(["bash", str(GOFLOOR_BUILD)], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        print(f"Go floor unavailable: {done.stderr.strip()[-400:]}", file=sys.stderr)
        return None
    return Path(done.stdout.strip().splitlines()[-1])


async def bench(args: argparse.Namespace, scenario: str, workdir: Path,
                rss: dict[str, float], cpu: dict[str, float]) -> BenchResult:
    nri_sock, policy_sock = workdir / "nri.sock", workdir / "policy.sock"
    config = workdir / f"{scenario}.yaml"
    config.write_text(json.dumps(bridge_config(scenario, policy_sock)))  # JSON is YAML
    pod = lsr_pod() if scenario == "koordinator-lsr" else None
    runtime = SimulatedRuntime(nri_sock, PROFILES[args.profile],
                               serialize_events=args.concurrency == 1)
    await runtime.start()
    try:
        async with contextlib.AsyncExitStack() as stack:
            policy = None
            if scenario == "webhook":
                policy = await stack.enter_async_context(process(
                    [__file__, "--serve-policy", str(policy_sock), "--policy-app",
                     args.policy_app], workdir / "policy.log"))
            elif scenario in SHIPPED:
                policy = await stack.enter_async_context(process(
                    ["-m", "policy_server.main", "--uds", str(policy_sock), "--log-level",
                     "warning", *SHIPPED[scenario][1]], workdir / f"policy-{scenario}.log"))
            if policy is not None:
                await until(accepts(policy_sock), what="the policy server listens",
                            timeout_s=15.0, in_thread=True)
            if scenario == "go-floor":
                plugin = await stack.enter_async_context(process(
                    ["--nri-socket", str(nri_sock), "--plugin-name", "gofloor",
                     "--plugin-index", "10"], workdir / "gofloor.log", exe=args.go_floor))
            else:
                plugin = await stack.enter_async_context(process(
                    ["-m", "bridge", "run", "--nri-socket", str(nri_sock), "--plugin-name",
                     "bench", "--plugin-index", "10", "--config", str(config),
                     "--control-socket", "", "--log-level", args.bridge_log_level],
                    workdir / f"bridge-{scenario}.log"))
            await runtime.wait_plugin(30)
            await verify(runtime, scenario, pod)
            procs = {"simulator": None, "plugin": plugin, "policy": policy}
            before = {name: cpu_s(proc) for name, proc in procs.items()
                      if name != "policy" or proc is not None}
            # As the bridge and the policy server do after start-up: the runtime's long-lived
            # objects out of the collector's sight, so no full collection of this process's
            # heap (17-25 ms each) lands in the measured window.
            gc.collect()
            gc.freeze()
            result = await run_bench(runtime, args.events, args.concurrency, warmup=args.warmup,
                                     pod=pod)
            for name, start in before.items():
                used = cpu_s(procs[name]) - start  # includes the warm-up events
                cpu[f"{scenario} {name}"] = round(used / (args.events + args.warmup) * 1e6, 1)
            dropped = runtime.closed_plugins or runtime.lost_plugins
            if dropped:
                raise SystemExit(f"plugin dropped during the benchmark: {dropped}")
            for name, proc in (("plugin", plugin), ("policy", policy)):
                mib = rss_mib(proc) if proc is not None else None
                if mib is not None:
                    rss[f"{scenario} {name}"] = round(mib, 1)
            return result
    finally:
        await runtime.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", choices=(*SCENARIOS, "all"), action="append",
                        help="repeatable; default all")
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--profile", choices=sorted(PROFILES), default="containerd-2.1.9")
    parser.add_argument("--policy-app", choices=("fastapi", "starlette"), default="fastapi")
    parser.add_argument("--bridge-log-level", default="warning")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    parser.add_argument("--serve-policy", metavar="SOCKET", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_policy:
        serve_policy(args.serve_policy, args.policy_app)
        return 0
    wanted = args.scenario or ["all"]
    scenarios = [s for s in SCENARIOS if "all" in wanted or s in wanted]
    args.go_floor = go_floor_binary() if "go-floor" in scenarios else None
    if args.go_floor is None and "go-floor" in scenarios:
        scenarios.remove("go-floor")
    workdir = Path(tempfile.mkdtemp(prefix="nwb-bench-", dir="/tmp"))
    results: dict[str, BenchResult] = {}
    rss: dict[str, float] = {}
    cpu: dict[str, float] = {}
    try:
        for scenario in scenarios:
            results[scenario] = asyncio.run(bench(args, scenario, workdir, rss, cpu))
    finally:
        if args.keep:
            print(f"logs kept in {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    checks: dict[str, bool] = {}
    floor = results.get("go-floor")
    ratios = {name: r.p50_s / floor.p50_s for name, r in results.items()
              if floor is not None and name != "go-floor"}
    if "no-webhook" in ratios:
        checks["no webhook p50 <= 1.2x the Go floor"] = (
            ratios["no-webhook"] <= TARGET_FLOOR_RATIO)
    if "policy-server" in results:
        r = results["policy-server"]
        checks["policy-server p50 <= 600 µs"] = r.p50_s <= TARGET_P50_S
        checks["policy-server p99 <= 1.5 ms"] = r.p99_s <= TARGET_P99_S
        checks["policy-server >= 1500 events/s"] = r.events_per_s >= TARGET_EVENTS_PER_S
    if "koordinator-lsr" in results:
        checks["koordinator-lsr p50 <= 800 µs"] = (
            results["koordinator-lsr"].p50_s <= TARGET_KOORD_P50_S)
    miss = None
    if "selector-miss" in results and "no-webhook" in results:
        miss = results["selector-miss"].p50_s / results["no-webhook"].p50_s
        checks["selector miss <= 1.2x no-webhook (p50)"] = miss <= TARGET_MISS_RATIO
    errors = sum(r.errors for r in results.values())
    report = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "loadavg": Path("/proc/loadavg").read_text().split()[:3],
        "profile": args.profile, "policy_app": args.policy_app, "warmup": args.warmup,
        "results": {name: r.to_dict() for name, r in results.items()},
        "go_floor_ratios": {name: round(v, 2) for name, v in ratios.items()},
        "rss_mib": rss,
        "cpu_us_per_event": cpu,
        "selector_miss_ratio": round(miss, 3) if miss is not None else None,
        "checks": checks,
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{report['date']}  {os.cpu_count()} CPUs, load {' '.join(report['loadavg'])}, "
              f"simulated {args.profile}, warm-up {args.warmup}")
        for name, r in results.items():
            print(f"[{name}] {r.format()}")
        if floor is None:
            print("Go floor: not measured (see above); no ratio lines")
        for name, ratio in ratios.items():
            print(f"{name} / Go floor (p50): {ratio:.2f}x")
        if miss is not None:
            print(f"selector miss / no webhook (p50): {miss:.2f}x")
        for name, us in cpu.items():
            print(f"CPU per event, {name}: {us:.0f} µs")
        for name, mib in rss.items():
            print(f"RSS after the run, {name}: {mib:.1f} MiB")
        for name, ok in checks.items():
            print(f"  {'met   ' if ok else 'MISSED'} {name}")
    return 1 if errors or (args.check and not all(checks.values())) else 0


if __name__ == "__main__":
    sys.exit(main())
