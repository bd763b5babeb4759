"""Benchmark the built-in ``cel`` policy against the same rules written with the Python SDK.

Five rules (benchmarks/cel/five-rules.yaml and benchmarks/cel/five_rules_sdk.py; also the same
rules as five NodePolicies, benchmarks/cel/five-policies.yaml, whose programs the policy joins
into one evaluation) answering a CreateContainer
(schemas/webhook/examples/CreateContainer.request.json, every rule passing, so every rule runs):

1. in-process, the whole webhook route (``hot_route.evaluate_body``: request bytes -> request
   path -> handlers -> reply bytes), the CEL policy and the SDK policy in one server;
2. over HTTP on a Unix socket, one ``nri-policy-server`` process serving both, with a
   keep-alive stdlib client.

Target (issue 35): the CEL policy costs no more than the SDK one per event.
Run: ``.venv/bin/python benchmarks/bench_cel.py [--iterations N] [--no-http] [--split]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_policy import UnixHTTPConnection, stats, wait_for_socket  # noqa: E402
from policy_server.http_edge.hot_route import evaluate_body  # noqa: E402
from policy_server.service import PolicyServer, ServerOptions  # noqa: E402

CEL_FILE = ROOT / "benchmarks" / "cel" / "five-rules.yaml"
SPLIT_FILE = ROOT / "benchmarks" / "cel" / "five-policies.yaml"
SDK_MODULE = ROOT / "benchmarks" / "cel" / "five_rules_sdk.py"
BODY = (ROOT / "schemas/webhook/examples/CreateContainer.request.json").read_bytes()
# label -> (server, policy): server 0 serves the CEL policy and the SDK one; with --split,
# server 1 serves the same rules as five NodePolicies (its cel policy joins their programs into
# one evaluation). A third policy between two requests of the first two makes the CPU caches
# colder for both, so the comparison the target is about runs without it by default.
POLICIES = {"CEL (cel built-in)": (0, "cel"), "Python SDK": (0, "five-rules-sdk")}
SPLIT = {"CEL, five NodePolicies": (1, "cel")}
Targets = Mapping[str, tuple[int, str]]
Results = dict[str, dict[str, float]]


def _used(targets: Targets) -> int:
    """How many servers ``targets`` reach (the first ones)."""
    return 1 + max(server for server, _ in targets.values())


def bench_route(iterations: int, targets: Targets) -> Results:
    options = [
        ServerOptions(default_policies=False, policy_modules=(str(SDK_MODULE),),
                      builtin_policies=(("cel", CEL_FILE),)),
        ServerOptions(default_policies=False, builtin_policies=(("cel", SPLIT_FILE),)),
    ]
    servers = [PolicyServer(o) for o in options[:_used(targets)]]
    print(f"in-process webhook route, request bytes -> reply bytes ({len(BODY)} B):")
    samples: dict[str, list[float]] = {label: [] for label in targets}
    clock = time.perf_counter
    for i in range(iterations + 500):
        for label, (server, name) in targets.items():  # interleaved: the same machine state
            coro = evaluate_body(servers[server], name, BODY)
            start = clock()
            try:
                coro.send(None)
            except StopIteration as done:
                status, reply = done.value[0], done.value[1]
                assert status == 200 and reply == b"{}", (name, status, reply)
            else:
                raise SystemExit("the route suspended")
            if i >= 500:
                samples[label].append(clock() - start)
    return {label: stats(label, samples[label]) for label in targets}


def post_interleaved(servers: Sequence[Sequence[str]], targets: Targets, iterations: int,
                     warmup: int = 200) -> dict[str, list[float]]:
    """Start one ``nri-policy-server`` per argument list in ``servers``, then POST the body to
    each target (label -> (server index, policy)) in turn, ``warmup + iterations`` times; the
    seconds each answer took, per label, warm-up left out. Every answer must be 200 ``{}``."""
    with tempfile.TemporaryDirectory() as tmp:
        socks = [Path(tmp) / f"policy-{i}.sock" for i in range(len(servers))]
        procs = [subprocess.Popen(
            [sys.executable, "-m", "policy_server.main", "--uds", str(sock), "--no-koordinator",
             *args, "--log-level", "warning"],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
            for sock, args in zip(socks, servers, strict=True)]
        try:
            for sock, proc in zip(socks, procs, strict=True):
                wait_for_socket(sock, proc)
            conns = [UnixHTTPConnection(str(sock)) for sock in socks]
            headers = {"content-type": "application/json"}
            samples: dict[str, list[float]] = {label: [] for label in targets}
            for i in range(iterations + warmup):
                for label, (server, name) in targets.items():
                    conn = conns[server]
                    start = time.perf_counter()
                    conn.request("POST", f"/v1/policies/{name}", body=BODY, headers=headers)
                    response = conn.getresponse()
                    data = response.read()
                    elapsed = time.perf_counter() - start
                    assert response.status == 200 and data == b"{}", (name, data)
                    if i >= warmup:
                        samples[label].append(elapsed)
            for conn in conns:
                conn.close()
            return samples
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(10)


def bench_http(iterations: int, targets: Targets) -> Results:
    servers = [("--policy", f"cel={CEL_FILE}", "--policy-module", str(SDK_MODULE)),
               ("--policy", f"cel={SPLIT_FILE}")]
    print("HTTP over a Unix socket, nri-policy-server in its own process:")
    samples = post_interleaved(servers[:_used(targets)], targets, iterations)
    return {label: stats(label, samples[label]) for label in targets}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=5000)
    parser.add_argument("--no-http", action="store_true")
    parser.add_argument("--rounds", type=int, default=3, help="each path measured this often")
    parser.add_argument("--split", action="store_true",
                        help="also the rules as five NodePolicies (cel/five-policies.yaml)")
    args = parser.parse_args()
    targets = {**POLICIES, **(SPLIT if args.split else {})}
    print(f"# {platform.machine()} {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, "
          f"{time.strftime('%Y-%m-%d')}")
    paths: dict[str, list[Results]] = {"in-process": [], "HTTP": []}
    for n in range(args.rounds):
        print(f"## round {n + 1}")
        paths["in-process"].append(bench_route(args.iterations, targets))
        if not args.no_http:
            paths["HTTP"].append(bench_http(args.iterations // 2, targets))
    print(f"## p50 per round ({' / '.join(targets)}, us)")
    for path, rounds in paths.items():
        if rounds:
            cells = [" / ".join(f"{r[label]['p50']:.1f}" for label in targets) for r in rounds]
            print(f"  {path:<11} " + "   ".join(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
