"""Soak: many events through simulator -> bridge process -> misbehaving policy process.

This process plays the runtime (the simulator, containerd 2.1.9 by default)
and runs pod lifecycles at full rate: RunPodSandbox, then for each of its
containers CreateContainer, StartContainer, UpdateContainer, StopContainer,
RemoveContainer, then StopPodSandbox and RemovePodSandbox; every pod and
container is new, so the bridge's caches see churn but keep a steady size.
`--events` counts the events delivered to the bridge. The bridge runs as
`python -m bridge run` with one webhook (Create, Start, Update and
StopContainer; failure policy Ignore; RemoveContainer reaches the bridge for
its state cache) to `benchmarks/chaos_policy.py` on uvicorn, which fails a
fraction of the calls at random (HTTP 500, slow past the timeout, not JSON,
not a reply, cut short).

What it checks and prints:
- every event answered (no errors under Ignore), inside the runtime's timeout;
- zero runtime disconnects (nobody in `closed_plugins` or `lost_plugins`);
- no leaked fds, sockets or asyncio tasks in the bridge (before vs after,
  read from /proc/<pid>/fd and the bridge's `asyncio_tasks` gauge);
- the bridge's RSS sampled every `--sample-every` events: start, end, max and
  the growth rate after warm-up (target: flat, at most 60 MB);
- latency percentiles of the plugin round trip, per event and overall.

    .venv/bin/python benchmarks/soak.py                        # 50,000 events
    .venv/bin/python benchmarks/soak.py --events 2000 --json   # what the CI test runs
    .venv/bin/python benchmarks/soak.py --bridge-python /opt/nri-webhook-bridge/bin/python

`--check` exits 1 if a property fails (the RSS ceiling with it: `--max-rss-mb`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bridge.contract.catalogue import EVENTS_BY_RPC  # noqa: E402
from bridge.proto.nri import api_pb2 as api  # noqa: E402
from bridge.simulator import PROFILES, SimulatedRuntime  # noqa: E402
from bridge.simulator.bench import LatencyStats  # noqa: E402
from bridge.simulator.synthetic import template  # noqa: E402
from tests.hardening.processes import (  # noqa: E402
    BridgeProcess,
    Process,
    bridge_process,
    open_fds,
    peak_rss_kb,
    rss_kb,
)
from tests.waiting import accepts, until  # noqa: E402

CONTAINER_LIFE = ("CreateContainer", "StartContainer", "UpdateContainer", "StopContainer",
                  "RemoveContainer")
# Run/RemovePodSandbox and RemoveContainer reach the bridge too: its state cache
# subscribes to them. StopPodSandbox is sent to nobody.
WEBHOOK_EVENTS = ["CreateContainer", "StartContainer", "UpdateContainer", "StopContainer"]
FAULTS = {"error": 0.01, "slow": 0.004, "garbage": 0.01, "schema": 0.01, "truncated": 0.005}
# The pool keeps at most one idle connection per concurrent caller; whether it
# holds one at the moment of measuring depends on the last call's fate.
POOL_SLACK_PER_CALLER = 1


@dataclass
class Soak:
    args: argparse.Namespace
    runtime: SimulatedRuntime
    bridge: BridgeProcess
    samples: list[tuple[int, float, int]] = field(default_factory=list)  # events, s, RSS KiB
    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    events: int = 0  # events delivered to the bridge

    async def pod_life(self, number: int, record: bool) -> None:
        """A new pod, `--containers-per-pod` containers through their whole life, pod gone."""
        base_pod, base = template()
        pod = api.PodSandbox()
        pod.CopyFrom(base_pod)
        pod.id = f"{number:064x}"
        pod.name = pod.uid = f"soak-pod-{number}"
        await self.event("RunPodSandbox", pod, None, record)
        for k in range(self.args.containers_per_pod):
            container = api.Container()
            container.CopyFrom(base)
            container.id = f"{number:056x}{k:08x}"
            container.name = f"soak-{number}-{k}"
            container.pod_sandbox_id = pod.id
            for name in CONTAINER_LIFE:
                await self.event(name, pod, container, record)
        await self.event("StopPodSandbox", pod, None, record)
        await self.event("RemovePodSandbox", pod, None, record)

    async def event(self, name: str, pod: api.PodSandbox, container: api.Container | None,
                    record: bool) -> None:
        resources = None
        if name == "UpdateContainer":
            resources = api.LinuxResources()
            resources.cpu.shares.value = 256 + self.events % 512
        result = await self.runtime.run_event(name, pod, container, linux_resources=resources)
        if result.error is not None:
            self.errors.append(f"{name} {pod.name}: {result.error}")
        if not record or not any(p.subscribed(EVENTS_BY_RPC[name]) for p in self.runtime.plugins):
            return
        self.events += 1
        self.latencies.setdefault(name, []).append(result.rpc_s)
        if self.events % self.args.sample_every == 0:
            self.samples.append((self.events, time.monotonic(), rss_kb(self.bridge.pid)))


@contextlib.asynccontextmanager
async def chaos_policy(workdir: Path, sock: Path, args: argparse.Namespace,
                       ) -> AsyncIterator[Process]:
    rates = [f"--{name}={rate * args.fault_scale}" for name, rate in FAULTS.items()]
    policy = await Process.start([sys.executable, str(REPO / "benchmarks" / "chaos_policy.py"),
                                  "--uds", str(sock), f"--slow-s={args.slow_s}",
                                  f"--seed={args.seed}", *rates], workdir / "policy.log")
    try:
        await until(accepts(sock), what=f"{sock} accepts connections", timeout_s=15.0,
                    in_thread=True)
        yield policy
    finally:
        with contextlib.suppress(AssertionError):
            await policy.terminate()
        await policy.kill()


def growth_kb_per_1k(samples: list[tuple[int, float, int]]) -> float:
    """Least-squares slope of RSS over events, in KiB per 1,000 events."""
    if len(samples) < 2:
        return 0.0
    xs = [s[0] for s in samples]
    ys = [s[2] for s in samples]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return 1000 * sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var


async def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    nri_sock, policy_sock = workdir / "nri.sock", workdir / "policy.sock"
    config = {"webhooks": [{"name": "chaos", "url": f"unix://{policy_sock}/v1/policy",
                            "events": WEBHOOK_EVENTS, "timeout": args.webhook_timeout,
                            "failure_policy": "Ignore"}]}
    runtime = SimulatedRuntime(nri_sock, PROFILES[args.profile],
                               request_timeout_s=args.request_timeout)
    await runtime.start()
    try:
        async with chaos_policy(workdir, policy_sock, args) as policy, \
                bridge_process(workdir, nri_sock, config=config, name="soak",
                               extra=["--log-level", "warning"],
                               python=args.bridge_python) as bridge:
            await runtime.wait_plugin(30)
            rss_connected = rss_kb(bridge.pid)
            soak = Soak(args, runtime, bridge)
            per_pod = 2 + len(CONTAINER_LIFE) * args.containers_per_pod  # delivered events
            number = 0
            for _ in range(max(1, args.warmup // per_pod)):
                await soak.pod_life(number, record=False)
                number += 1
            await asyncio.sleep(0.2)
            before: dict[str, Any] = {"fds": open_fds(bridge.pid),
                                      "metrics": await bridge.metrics(),
                                      "rss_kb": rss_kb(bridge.pid),
                                      "policy_rss_kb": rss_kb(policy.pid)}
            soak.samples.append((0, time.monotonic(), before["rss_kb"]))
            started = time.monotonic()
            while soak.events < args.events:
                await soak.pod_life(number, record=True)
                number += 1
            duration = time.monotonic() - started
            await asyncio.sleep(0.5)  # let late policy replies and closes settle
            after: dict[str, Any] = {"fds": open_fds(bridge.pid),
                                     "metrics": await bridge.metrics(),
                                     "rss_kb": rss_kb(bridge.pid)}
            peak = peak_rss_kb(bridge.pid)
            after["policy_rss_kb"] = rss_kb(policy.pid)
            # Before the bridge stops, which the runtime records as a lost plugin.
            closed, lost = list(runtime.closed_plugins), list(runtime.lost_plugins)
            exit_code, exit_s = await bridge.terminate()
    finally:
        await runtime.stop()
    disconnects = {"closed_plugins": closed, "lost_plugins": lost}
    return report(args, soak, before, after, disconnects, rss_connected, peak, duration,
                  exit_code, exit_s)


def report(args: argparse.Namespace, soak: Soak, before: dict[str, Any], after: dict[str, Any],
           disconnects: dict[str, list[tuple[str, str]]], rss_connected: int, peak: int,
           duration: float, exit_code: int, exit_s: float) -> dict[str, Any]:
    every = [x for values in soak.latencies.values() for x in values]
    metrics = after["metrics"]
    outcomes = {key.split("outcome=")[1].split(",")[0]: int(value) for key, value in metrics.items()
                if key.startswith("nri_webhook_bridge_webhook_requests_total")}
    rss = [s[2] for s in soak.samples]
    fd_growth = sum(after["fds"].values()) - sum(before["fds"].values())
    task_growth = (metrics["nri_webhook_bridge_asyncio_tasks"]
                   - before["metrics"]["nri_webhook_bridge_asyncio_tasks"])
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "cpus": os.cpu_count(), "profile": args.profile, "bridge_python": args.bridge_python,
        "events": soak.events,
        "duration_s": round(duration, 2), "events_per_s": round(soak.events / duration, 1),
        "errors": len(soak.errors), "first_errors": soak.errors[:5],
        **disconnects,
        "webhook_outcomes": outcomes,
        "deadline_misses": metrics["nri_webhook_bridge_deadline_misses_total"],
        "fds_before": before["fds"], "fds_after": after["fds"], "fd_growth": fd_growth,
        "tasks_before": before["metrics"]["nri_webhook_bridge_asyncio_tasks"],
        "tasks_after": metrics["nri_webhook_bridge_asyncio_tasks"], "task_growth": task_growth,
        "in_flight_after": metrics["nri_webhook_bridge_in_flight_events"],
        "rss_kb": {"connected": rss_connected, "start": rss[0], "end": rss[-1],
                   "max_sampled": max(rss), "peak_hwm": peak,
                   "growth_kb_per_1k_events": round(growth_kb_per_1k(soak.samples), 2),
                   "samples": [s[2] for s in soak.samples]},
        "policy_rss_kb": {"before": before.get("policy_rss_kb"), "end": after["policy_rss_kb"]},
        "latency_us": {"all": LatencyStats.of(every).to_us(),
                       **{e: LatencyStats.of(v).to_us() for e, v in soak.latencies.items()}},
        "max_latency_s": round(max(every), 4), "request_timeout_s": args.request_timeout,
        "bridge_exit": {"code": exit_code, "seconds": round(exit_s, 2)},
    }
    result["checks"] = {
        "no errors (every event answered)": not soak.errors,
        "every answer inside the runtime timeout": max(every) < args.request_timeout,
        "zero runtime disconnects": not any(disconnects.values()),
        "no leaked fds or sockets": fd_growth <= POOL_SLACK_PER_CALLER,
        "no leaked tasks": task_growth <= 0,
        "nothing in flight after": metrics["nri_webhook_bridge_in_flight_events"] == 0,
        "no deadline misses": metrics["nri_webhook_bridge_deadline_misses_total"] == 0,
        f"RSS at most {args.max_rss_mb} MB": max(rss) <= args.max_rss_mb * 1024,
        "clean exit": exit_code == 0,
    }
    return result


def print_report(r: dict[str, Any]) -> None:
    rss = r["rss_kb"]
    print(f"{r['date']}  {r['cpus']} CPUs, simulated {r['profile']}: {r['events']} events in "
          f"{r['duration_s']} s ({r['events_per_s']} events/s)")
    print(f"errors {r['errors']}, closed plugins {r['closed_plugins']}, lost plugins "
          f"{r['lost_plugins']}, deadline misses {r['deadline_misses']:.0f}")
    print(f"webhook outcomes: {r['webhook_outcomes']}")
    print(f"fds before {r['fds_before']} after {r['fds_after']}; asyncio tasks before "
          f"{r['tasks_before']:.0f} after {r['tasks_after']:.0f}; in flight after "
          f"{r['in_flight_after']:.0f}")
    mib = {key: f"{value / 1024:.1f}" for key, value in rss.items() if key != "samples"}
    print(f"bridge RSS (MiB): connected {mib['connected']}, start {mib['start']}, end "
          f"{mib['end']}, max {mib['max_sampled']} (peak {mib['peak_hwm']}); growth "
          f"{rss['growth_kb_per_1k_events']} KiB per 1k events")
    policy = r["policy_rss_kb"]
    print(f"policy process RSS (MiB, uvicorn + benchmarks/chaos_policy.py): before "
          f"{policy['before'] / 1024:.1f}, end {policy['end'] / 1024:.1f}")
    for name, stats in r["latency_us"].items():
        print(f"  {name:16s} p50 {stats['p50']:8.0f} µs  p90 {stats['p90']:8.0f}  p99 "
              f"{stats['p99']:8.0f}  max {stats['max']:8.0f}")
    print(f"bridge exit: {r['bridge_exit']}")
    for name, ok in r["checks"].items():
        print(f"  {'ok    ' if ok else 'FAILED'} {name}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--sample-every", type=int, default=1000)
    parser.add_argument("--containers-per-pod", type=int, default=3)
    parser.add_argument("--profile", choices=sorted(PROFILES), default="containerd-2.1.9")
    parser.add_argument("--request-timeout", type=float, default=2.0)
    parser.add_argument("--webhook-timeout", default="100ms")
    parser.add_argument("--slow-s", type=float, default=0.3)
    parser.add_argument("--fault-scale", type=float, default=1.0,
                        help="multiply every fault rate (0 = a well-behaved policy)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-rss-mb", type=float, default=60.0)
    parser.add_argument("--bridge-python", default=sys.executable, metavar="PYTHON",
                        help="interpreter for the bridge process, e.g. a production install's "
                             "(the dev venv imports ~3 MB that one does not)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--check", action="store_true", help="exit 1 if a check fails")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="nwb-soak-", dir="/tmp"))
    try:
        result = asyncio.run(run(args, workdir))
    finally:
        if args.keep:
            print(f"logs kept in {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_report(result)
    return 1 if args.check and not all(result["checks"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
