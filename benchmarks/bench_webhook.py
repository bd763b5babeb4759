"""Benchmark: simulator -> bridge -> uvicorn policy on a Unix socket -> back.

Three processes, as on a node: this process plays the runtime (simulator),
the bridge runs as `python -m bridge run`, and the policy is a uvicorn app on
a Unix socket in a third process (`--policy-app fastapi` or `starlette`; it
answers every CreateContainer with one env var and cpu.shares). Scenarios:

- `webhook`: the webhook selects every pod: a full HTTP round trip per event;
- `selector-miss`: the webhook's selector matches no pod: no HTTP call;
- `no-webhook`: the bridge's built-in static handler, no webhook configured.

    .venv/bin/python benchmarks/bench_webhook.py                  # all three, 3000 events each
    .venv/bin/python benchmarks/bench_webhook.py --scenario webhook --events 10000 --json

Targets on a 2-core machine (webhook): p50 <= 1.5 ms, p99 <= 5 ms, >= 1000 events/s;
selector miss p50 <= 1.2x the no-webhook p50. `--check` exits 1 if one is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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
from tests.hardening.processes import wait_listening  # noqa: E402

TARGET_P50_S = 1.5e-3
TARGET_P99_S = 5e-3
TARGET_EVENTS_PER_S = 1000.0
TARGET_MISS_RATIO = 1.2
SCENARIOS = ("webhook", "selector-miss", "no-webhook")
REPLY = {"adjust": {"env": [{"key": "BENCH", "value": "1"}],
                    "linux": {"resources": {"cpu": {"shares": 512}}}}}
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
async def process(args: list[str], log_path: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    with log_path.open("wb") as log:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, *args, cwd=REPO, stdin=asyncio.subprocess.DEVNULL,
            stdout=log, stderr=asyncio.subprocess.STDOUT)
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)  # by PID: only the process we started
            try:
                await asyncio.wait_for(proc.wait(), STOP_TIMEOUT_S)
            except TimeoutError:
                proc.kill()
                await proc.wait()


async def verify(runtime: SimulatedRuntime, applied: bool) -> None:
    """One event outside the measurement: did the policy's adjustment arrive (or not)?"""
    from bridge.simulator.synthetic import template
    pod, container = template()
    container.id = "f" * 64
    result = await runtime.create_container(pod, container)
    runtime.state.containers.pop(container.id, None)
    got = result.container is not None and "BENCH=1" in result.container.env
    if result.error or got != applied:
        raise SystemExit(f"verification failed: error={result.error!r}, adjustment applied={got}")


def bridge_config(scenario: str, policy_sock: Path) -> dict[str, Any]:
    if scenario == "no-webhook":
        return {}
    hook: dict[str, Any] = {"name": "bench", "url": f"unix://{policy_sock}/v1/policy",
                            "events": ["CreateContainer"], "timeout": "1s"}
    if scenario == "selector-miss":
        hook["namespaces"] = ["no-such-namespace"]
    return {"webhooks": [hook], "control": {"socket": None}}


async def bench(args: argparse.Namespace, scenario: str, workdir: Path) -> BenchResult:
    nri_sock, policy_sock = workdir / "nri.sock", workdir / "policy.sock"
    config = workdir / f"{scenario}.yaml"
    config.write_text(json.dumps(bridge_config(scenario, policy_sock)))  # JSON is YAML
    runtime = SimulatedRuntime(nri_sock, PROFILES[args.profile],
                               serialize_events=args.concurrency == 1)
    await runtime.start()
    try:
        async with contextlib.AsyncExitStack() as stack:
            if scenario == "webhook":
                await stack.enter_async_context(process(
                    [__file__, "--serve-policy", str(policy_sock), "--policy-app",
                     args.policy_app], workdir / "policy.log"))
                await wait_listening(policy_sock)
            await stack.enter_async_context(process(
                ["-m", "bridge", "run", "--nri-socket", str(nri_sock), "--plugin-name", "bench",
                 "--plugin-index", "10", "--config", str(config), "--control-socket", "",
                 "--log-level", args.bridge_log_level], workdir / f"bridge-{scenario}.log"))
            await runtime.wait_plugin(30)
            await verify(runtime, applied=scenario == "webhook")
            result = await run_bench(runtime, args.events, args.concurrency, warmup=args.warmup)
            dropped = runtime.closed_plugins or runtime.lost_plugins
            if dropped:
                raise SystemExit(f"plugin dropped during the benchmark: {dropped}")
            return result
    finally:
        await runtime.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", choices=(*SCENARIOS, "all"), default="all")
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
    scenarios = SCENARIOS if args.scenario == "all" else (args.scenario,)
    workdir = Path(tempfile.mkdtemp(prefix="nwb-bench-", dir="/tmp"))
    results: dict[str, BenchResult] = {}
    try:
        for scenario in scenarios:
            results[scenario] = asyncio.run(bench(args, scenario, workdir))
    finally:
        if args.keep:
            print(f"logs kept in {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    checks: dict[str, bool] = {}
    if "webhook" in results:
        r = results["webhook"]
        checks["webhook p50 <= 1.5 ms"] = r.p50_s <= TARGET_P50_S
        checks["webhook p99 <= 5 ms"] = r.p99_s <= TARGET_P99_S
        checks["webhook >= 1000 events/s"] = r.events_per_s >= TARGET_EVENTS_PER_S
    ratio = None
    if "selector-miss" in results and "no-webhook" in results:
        ratio = results["selector-miss"].p50_s / results["no-webhook"].p50_s
        checks["selector miss <= 1.2x no-webhook (p50)"] = ratio <= TARGET_MISS_RATIO
    errors = sum(r.errors for r in results.values())
    report = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "profile": args.profile, "policy_app": args.policy_app, "warmup": args.warmup,
        "results": {name: r.to_dict() for name, r in results.items()},
        "selector_miss_ratio": round(ratio, 3) if ratio is not None else None,
        "checks": checks,
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{report['date']}  {os.cpu_count()} CPUs, simulated {args.profile}, "
              f"policy {args.policy_app} on uvicorn, warm-up {args.warmup}")
        for name, r in results.items():
            print(f"[{name}] {r.format()}")
        if ratio is not None:
            print(f"selector miss / no webhook (p50): {ratio:.2f}x")
        for name, ok in checks.items():
            print(f"  {'met   ' if ok else 'MISSED'} {name}")
    return 1 if errors or (args.check and not all(checks.values())) else 0


if __name__ == "__main__":
    sys.exit(main())
