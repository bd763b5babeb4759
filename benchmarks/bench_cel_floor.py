"""What a CEL policy pays before its rules run, inside a serving ``nri-policy-server``.

One server process serves, over a Unix socket: the ``cel`` policy with the five rules of
benchmarks/cel/five-rules.yaml, the same rules with the Python SDK (five_rules_sdk.py), and the
body-only policies of benchmarks/cel/floor_policies.py (nothing; the constant CEL program
``true`` with nothing bound; with the rules' read part bound; with it decoded from each body).
Requests are interleaved (a CreateContainer, every rule passing); each policy's p50 is printed
with its cost over ``body-noop``. The question it answers: can any CEL evaluation cost less per
event than the SDK policy's whole work here (docs/performance.md, CEL node policies)?
Run: ``.venv/bin/python benchmarks/bench_cel_floor.py [--iterations N] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_cel import CEL_FILE, SDK_MODULE, post_interleaved  # noqa: E402
from benchmarks.bench_policy import stats  # noqa: E402

FLOOR_MODULE = ROOT / "benchmarks" / "cel" / "floor_policies.py"
POLICIES = ("five-rules-sdk", "cel", "cel-true-decoded", "cel-true-bound", "cel-true",
            "body-noop")


def bench(iterations: int) -> dict[str, float]:
    server = ("--policy", f"cel={CEL_FILE}", "--policy-module", str(SDK_MODULE),
              "--policy-module", str(FLOOR_MODULE))
    samples = post_interleaved([server], {name: (0, name) for name in POLICIES}, iterations)
    return {name: stats(name, samples[name])["p50"] for name in POLICIES}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print(f"# {platform.machine()} {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, "
          f"{time.strftime('%Y-%m-%d')}, load average {os.getloadavg()[0]:.2f}")
    for n in range(args.rounds):
        print(f"## round {n + 1}: p50 over HTTP, and over body-noop")
        p50 = bench(args.iterations)
        for name in POLICIES:
            print(f"  {name:<18} {p50[name]:7.1f} us   +{p50[name] - p50['body-noop']:5.1f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
