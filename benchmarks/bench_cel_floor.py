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
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_policy import UnixHTTPConnection, stats, wait_for_socket  # noqa: E402

CEL_FILE = ROOT / "benchmarks" / "cel" / "five-rules.yaml"
SDK_MODULE = ROOT / "benchmarks" / "cel" / "five_rules_sdk.py"
FLOOR_MODULE = ROOT / "benchmarks" / "cel" / "floor_policies.py"
BODY = (ROOT / "schemas/webhook/examples/CreateContainer.request.json").read_bytes()
POLICIES = ("five-rules-sdk", "cel", "cel-true-decoded", "cel-true-bound", "cel-true",
            "body-noop")


def bench(iterations: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        sock = Path(tmp) / "policy.sock"
        proc = subprocess.Popen(
            [sys.executable, "-m", "policy_server.main", "--uds", str(sock), "--no-koordinator",
             "--policy", f"cel={CEL_FILE}", "--policy-module", str(SDK_MODULE),
             "--policy-module", str(FLOOR_MODULE), "--log-level", "warning"],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
        try:
            wait_for_socket(sock, proc)
            conn = UnixHTTPConnection(str(sock))
            headers = {"content-type": "application/json"}
            samples: dict[str, list[float]] = {name: [] for name in POLICIES}
            for i in range(iterations + 200):
                for name in POLICIES:
                    start = time.perf_counter()
                    conn.request("POST", f"/v1/policies/{name}", body=BODY, headers=headers)
                    response = conn.getresponse()
                    data = response.read()
                    elapsed = time.perf_counter() - start
                    assert response.status == 200 and data == b"{}", (name, data)
                    if i >= 200:
                        samples[name].append(elapsed)
            conn.close()
            return {name: stats(name, samples[name])["p50"] for name in POLICIES}
        finally:
            proc.terminate()
            proc.wait(10)


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
