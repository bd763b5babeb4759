"""Benchmark `nri-webhook-bridge test`: what a case costs.

Runs, as a user would (`python -m bridge test ... --junit`), (1) the example suites in
examples/tests/ and (2) a generated 12-case suite of single pods against README's example
policy, and prints per suite: the wall time of the command, the sum of the cases' times (the
JUnit times: from a case's first CRI call to its last check, so without the private policy
server's start), and per case min/p50/max and mean. The first case through a webhook
configuration also starts the bridge process (about 0.3 s); the cases after it share it.

Run: ``.venv/bin/python benchmarks/bench_suite.py [--rounds N]``. Prints numbers; no target
is asserted here (docs/performance.md has the measurements and the target, 0.15 s a case).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted(str(p) for p in (ROOT / "examples" / "tests").glob("*.yaml"))
POD = """      - apiVersion: v1
        kind: Pod
        metadata: {{name: pod-{i}, namespace: shop, labels: {{example.com/team: t{i}}}}}
        spec:
          containers: [{{name: app, image: registry.example.com/app:{i}}}]
"""


def twelve_single_pods(work: Path) -> str:
    cases = "".join(
        f"  - name: pod {i} gets its team\n    manifests:\n{POD.format(i=i)}"
        f"    expect:\n      - {{pod: shop/pod-{i}, verdict: adjusted, "
        f"effective: {{env: {{contains: TEAM=t{i}}}}}}}\n" for i in range(12))
    path = work / "twelve.yaml"
    path.write_text(f"webhooks: {{policy_modules: [{ROOT / 'examples' / 'label_env_policy.py'}]}}\n"
                    f"cases:\n{cases}")
    return str(path)


def run(suites: list[str], work: Path) -> tuple[float, list[float]]:
    junit = work / "junit.xml"
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "bridge", "test", *suites, "--junit",
                           str(junit)], capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"the suites failed:\n{done.stdout}{done.stderr}")
    times = [float(c.get("time") or 0) for c in ET.parse(junit).getroot().iter("testcase")]
    return wall, times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-suite-") as tmp:
        work = Path(tmp)
        for label, suites in (("examples/tests/*.yaml", EXAMPLES),
                              ("12 single pods (label-env)", [twelve_single_pods(work)])):
            print(label)
            for _ in range(args.rounds):
                wall, times = run(suites, work)
                print(f"  {len(times)} cases: command {wall:.2f} s, cases {sum(times):.3f} s; "
                      f"per case min {min(times):.3f} p50 {statistics.median(times):.3f} "
                      f"max {max(times):.3f} mean {statistics.fmean(times):.3f} s; "
                      f"command / cases {wall / len(times):.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
