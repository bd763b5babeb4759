"""`nri-webhook-bridge simulate`: run the runtime simulator from the command line.

Modes: `--scenario FILE` replays a scenario (or a bundled one by name),
`--bench N` sends N CreateContainer events; with neither, the simulator only
waits for a plugin to register and synchronize (`--hold` then keeps the connection until
standard input closes). Exit codes: 0 ok, 1 a plugin
was closed or lost, an event failed, or no plugin came; 2 usage errors.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from typing import Any

from bridge.runtime_facts.profiles import DEFAULT_PROFILE, PROFILES
from bridge.simulator.bench import BenchResult, run_bench
from bridge.simulator.connection import PluginConnection
from bridge.simulator.delivery import EventResult
from bridge.simulator.hostile import ProbeOutcome, probe_plugin
from bridge.simulator.result_text import format_result, result_to_dict
from bridge.simulator.runtime import SimulatedRuntime
from bridge.simulator.scenario import (
    Scenario,
    ScenarioError,
    bundled_scenarios,
    load_scenario,
    run_scenario,
)
from bridge.simulator.synthetic import synthetic_state

log = logging.getLogger(__name__)

DEFAULT_SOCKET = "/tmp/nri-webhook-bridge-sim/nri.sock"  # never the real runtime's socket
EXIT_OK, EXIT_PLUGIN, EXIT_USAGE = 0, 1, 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--socket", default=DEFAULT_SOCKET, metavar="PATH",
                        help=f"where to listen (default {DEFAULT_SOCKET})")
    parser.add_argument("--profile", choices=sorted(PROFILES), default=None,
                        help="runtime to emulate (default: the scenario's, else "
                             f"{DEFAULT_PROFILE})")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--scenario", metavar="FILE",
                      help="scenario .json or event log .jsonl (or a bundled name: "
                           + ", ".join(bundled_scenarios()) + ")")
    mode.add_argument("--bench", type=int, metavar="N", help="send N CreateContainer events")
    parser.add_argument("--concurrency", type=int, default=1, metavar="K",
                        help="bench: events in flight at once (default 1, like containerd)")
    parser.add_argument("--warmup", type=int, default=None, metavar="W",
                        help="bench: unmeasured events first (default min(500, N/10))")
    parser.add_argument("--request-timeout-ms", type=int, default=2000, metavar="MS")
    parser.add_argument("--registration-timeout-ms", type=int, default=5000, metavar="MS")
    parser.add_argument("--wait-plugin-s", type=float, default=30.0, metavar="S",
                        help="how long to wait for a plugin to register (default 30)")
    parser.add_argument("--sync-pods", type=int, default=0, metavar="N",
                        help="synthetic pods in the initial state")
    parser.add_argument("--sync-containers", type=int, default=0, metavar="M",
                        help="synthetic containers in the initial state")
    parser.add_argument("--sync-annotation-bytes", type=int, default=0, metavar="B",
                        help="padding per synthetic container (make sync exceed 4 MiB)")
    parser.add_argument("--hostile", action="store_true",
                        help="send hostile frames to the plugin first "
                             "(docs/protocol.md#hostile-input)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--hold", action="store_true",
                        help="after the report, stay connected until standard input closes "
                        "(to inspect a plugin while it holds the synchronized state)")


def _usage_problem(args: argparse.Namespace) -> str | None:
    if args.bench is not None and args.bench < 1:
        return "--bench must be >= 1"
    if args.concurrency < 1:
        return "--concurrency must be >= 1"
    if args.warmup is not None and args.warmup < 0:
        return "--warmup must be >= 0"
    if min(args.sync_pods, args.sync_containers, args.sync_annotation_bytes) < 0:
        return "--sync-* values must be >= 0"
    if args.request_timeout_ms <= 0 or args.registration_timeout_ms <= 0:
        return "timeouts must be > 0"
    return None


async def main(args: argparse.Namespace) -> int:
    problem = _usage_problem(args)
    scenario: Scenario | None = None
    if problem is None and args.scenario:
        try:
            scenario = load_scenario(args.scenario)
        except (ScenarioError, OSError) as exc:
            problem = str(exc)
    if problem is not None:
        print(f"simulate: {problem}", file=sys.stderr)
        return EXIT_USAGE
    profile = args.profile or (scenario.profile if scenario else None) or DEFAULT_PROFILE
    runtime = SimulatedRuntime(
        args.socket, PROFILES[profile], request_timeout_s=args.request_timeout_ms / 1000,
        registration_timeout_s=args.registration_timeout_ms / 1000,
        serialize_events=args.concurrency == 1)
    if scenario is not None:
        scenario.seed(runtime)
    if args.sync_pods or args.sync_containers:
        runtime.state.seed(*synthetic_state(args.sync_pods, args.sync_containers,
                                            annotation_bytes=args.sync_annotation_bytes))
    out = _Output(args.json)
    await runtime.start()
    try:
        out.line(f"simulating {profile} on {args.socket}; waiting for a plugin "
                 f"(up to {args.wait_plugin_s:g} s)")
        try:
            conn = await runtime.wait_plugin(args.wait_plugin_s)
        except TimeoutError:
            out.data["error"] = "no plugin registered"
            out.line(f"no plugin registered within {args.wait_plugin_s:g} s")
            return _finish(out, runtime, EXIT_PLUGIN)
        _report_plugin(out, runtime, conn)
        if args.hostile:
            _report_probes(out, await probe_plugin(conn))
        failed = False
        if scenario is not None:
            failed = _report_scenario(out, scenario, await run_scenario(runtime, scenario))
        elif args.bench is not None:
            warmup = args.warmup if args.warmup is not None else min(500, args.bench // 10)
            bench = await run_bench(runtime, args.bench, args.concurrency, warmup=warmup)
            failed = _report_bench(out, bench)
        status = EXIT_PLUGIN if failed or runtime.closed_plugins or runtime.lost_plugins else 0
        status = _finish(out, runtime, status)
        if args.hold:
            await asyncio.to_thread(sys.stdin.buffer.read)  # returns at end of input
        return status
    finally:
        await runtime.stop()


class _Output:
    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.data: dict[str, Any] = {}

    def line(self, text: str) -> None:
        if not self.as_json:
            print(text, flush=True)


def _report_plugin(out: _Output, runtime: SimulatedRuntime, conn: PluginConnection) -> None:
    out.data["profile"] = runtime.profile.key
    out.data["plugin"] = {"name": conn.label, "events": f"0x{conn.events:04x}",
                          "sync_chunks": conn.sync_chunks,
                          "sync_objects": [len(runtime.state.pods), len(runtime.state.containers)]}
    out.line(f"plugin {conn.label} registered: events 0x{conn.events:04x}, synchronized "
             f"{len(runtime.state.pods)} pods / {len(runtime.state.containers)} containers in "
             f"{conn.sync_chunks} message(s)")


def _report_probes(out: _Output, outcomes: list[ProbeOutcome]) -> None:
    out.data["hostile"] = [{"probe": o.probe, "code": o.code, "message": o.message, "ok": o.ok}
                           for o in outcomes]
    for o in outcomes:
        answer = "no answer expected" if o.code is None else f"code {o.code} {o.message!r}"
        out.line(f"  hostile {o.probe:<20} {answer:<60} {'ok' if o.ok else 'UNEXPECTED'}")


def _report_scenario(out: _Output, scenario: Scenario, results: list[EventResult]) -> bool:
    requests = [step.request for step in scenario.events]
    out.data["scenario"] = scenario.name
    out.data["results"] = [result_to_dict(r, q) for r, q in zip(results, requests, strict=True)]
    for result, request in zip(results, requests, strict=True):
        out.line(format_result(result, request))
    return any(r.error for r in results)


def _report_bench(out: _Output, bench: BenchResult) -> bool:
    out.data["bench"] = bench.to_dict()
    out.line(bench.format())
    return bench.errors > 0


def _finish(out: _Output, runtime: SimulatedRuntime, status: int) -> int:
    out.data["closed_plugins"] = [list(p) for p in runtime.closed_plugins]
    out.data["lost_plugins"] = [list(p) for p in runtime.lost_plugins]
    out.data["updates_received"] = len(runtime.updates)
    out.data["exit_code"] = status
    for name, reason in runtime.closed_plugins:
        out.line(f"plugin {name} closed by the runtime: {reason}")
    for name, reason in runtime.lost_plugins:
        out.line(f"plugin {name} disconnected: {reason}")
    if out.as_json:
        print(json.dumps(out.data, indent=2), flush=True)
    return status


def run_simulator(argv: list[str] | None = None) -> int:
    """Standalone entry point: `python -m bridge.simulator.commands`."""
    parser = argparse.ArgumentParser(prog="nri-webhook-bridge simulate", description=__doc__)
    add_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return asyncio.run(main(args))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(run_simulator())
