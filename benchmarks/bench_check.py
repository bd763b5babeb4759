"""Benchmark `make check`: its wall time, its CPU time and the machine's load around it.

Runs `make check` (lint, types, import contracts, the in-process tests on two workers) the
given number of times in this checkout, as a developer would before a commit, and prints per
run the wall time, the CPU time of every process it started (user + sys), the load average
before and after, and pytest's summary line. The first run warms what a run leaves behind
(mypy's cache, the bytecode of the tests pytest rewrote); say `--rounds` to run more.

Run: ``.venv/bin/python benchmarks/bench_check.py [--rounds N]``. Prints numbers; no target is
asserted here (docs/performance.md#make-check has the measurements and the target, 60 s).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUMMARY = re.compile(r"^=*\s*(\d+ passed.*?)\s*=*$", re.MULTILINE)


def one_run() -> tuple[float, float, str, str]:
    """(wall s, CPU s of the children, pytest's summary, the load average before and after)."""
    before_load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    done = subprocess.run(["make", "check"], cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-3000:] + done.stderr[-2000:])
        raise SystemExit(f"make check failed (exit {done.returncode})")
    found = SUMMARY.findall(done.stdout)
    load = f"{before_load:.2f}-{os.getloadavg()[0]:.2f}"
    return wall, cpu, found[-1] if found else "(no pytest summary)", load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="runs of make check (default 3)")
    args = parser.parse_args()
    print(f"{'run':>3}  {'wall s':>7}  {'CPU s':>7}  {'load':>11}  pytest")
    walls = []
    for n in range(1, args.rounds + 1):
        wall, cpu, summary, load = one_run()
        walls.append(wall)
        print(f"{n:>3}  {wall:7.1f}  {cpu:7.1f}  {load:>11}  {summary}", flush=True)
    print(f"wall: min {min(walls):.1f} s, max {max(walls):.1f} s over {len(walls)} runs")


if __name__ == "__main__":
    main()
