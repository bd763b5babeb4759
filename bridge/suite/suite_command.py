"""`nri-webhook-bridge test SUITE...`: declarative policy tests (docs/policy-tests.md).

Owns: the subcommand's arguments, loading every suite before anything runs (a bad one stops
all: exit 2, the message naming the file and the field), running them (bridge.suite.run), one
line per case — PASS or FAIL and its name, a failure followed by what differs — a closing
`N passed, M failed` line, the JUnit file, and the exit code: 0 every case passed, 1 a case
failed, 2 a bad suite.
Must not: check expectations or run trials itself.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path

from bridge.suite import junit
from bridge.suite.load import LoadedSuite, load
from bridge.suite.problems import SuiteError
from bridge.suite.run import CaseResult, run_suite

EXIT_OK, EXIT_FAILED, EXIT_BAD_SUITE = 0, 1, 2


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("suites", nargs="+", metavar="SUITE",
                   help="suite files (YAML; schemas/test/suite.schema.json)")
    p.add_argument("--junit", metavar="FILE", help="also write the results as JUnit XML")


def main(args: argparse.Namespace) -> int:
    suites, bad = [], []
    for path in args.suites:  # every bad suite is named, each with every problem it has
        try:
            suites.append(load(path))
        except SuiteError as exc:
            bad.append(exc)
    if args.junit and (problem := _unwritable(args.junit)):
        print(f"nri-webhook-bridge test: --junit {args.junit}: {problem}", file=sys.stderr)
        return EXIT_BAD_SUITE
    if bad:
        for error in bad:
            _bad_suite(error)
        return EXIT_BAD_SUITE
    # The simulator warns of every rejected or failed event; each case's line already says it.
    logging.getLogger("bridge.simulator").setLevel(logging.ERROR)
    try:
        results = asyncio.run(_run(suites))
    except SuiteError as exc:
        _bad_suite(exc)
        return EXIT_BAD_SUITE
    except OSError as exc:
        print(f"nri-webhook-bridge test: cannot run: {exc}", file=sys.stderr)
        return EXIT_FAILED
    failed = sum(1 for r in results if not r.ok)
    print(f"{len(results) - failed} passed, {failed} failed")
    if args.junit:
        try:
            junit.write(results, args.junit)
        except OSError as exc:
            print(f"nri-webhook-bridge test: --junit: {exc}", file=sys.stderr)
            return EXIT_BAD_SUITE
    return EXIT_FAILED if failed else EXIT_OK


async def _run(suites: list[LoadedSuite]) -> list[CaseResult]:
    results: list[CaseResult] = []
    for suite in suites:
        results += await run_suite(suite, _print)
    return results


def _unwritable(path: str) -> str | None:
    """Why the JUnit file cannot be written (found before any case runs), or None."""
    target = Path(path)
    if target.is_dir():
        return "is a directory"
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        return f"no such directory: {parent}"
    if not os.access(target if target.exists() else parent, os.W_OK):
        return "permission denied"
    return None


def _bad_suite(exc: SuiteError) -> None:
    for line in str(exc).splitlines():
        print(f"nri-webhook-bridge test: {line}", file=sys.stderr)


def _print(result: CaseResult) -> None:
    print(f"{'PASS' if result.ok else 'FAIL'} {result.suite.path}: {result.name}", flush=True)
    for line in (result.error or "").splitlines():
        print(f"    error: {line}")
    for mismatch in result.mismatches:
        print(mismatch.render())
