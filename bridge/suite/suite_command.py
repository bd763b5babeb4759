"""`nri-webhook-bridge test SUITE...`: declarative policy tests (docs/policy-tests.md).

Owns: the subcommand's arguments — suite files and directories of them (their `*.yaml` and
`*.yml`, in name order), `--case PATTERN` to run a subset, `--output text|json`, `--junit` —
loading every suite before anything runs (a bad one stops all: exit 2, every problem named
with its file, field and line; so does an unwritable `--junit` path or a `--case` that matches
nothing), running them (bridge.suite.run), the output — text: one line per case, PASS or FAIL
and its name, a failure followed by what differs, then `N passed, M failed`; json: one JSON
object per case and line, with what was expected and what was got — the JUnit file, and the
exit code: 0 every case passed, 1 a case failed, 2 a bad suite, 3 a webhook call failed (as
`try`: a case whose policy could not answer says nothing about the policy; 3 goes before 1).
Must not: check expectations or run trials itself.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bridge.suite import junit
from bridge.suite.expect import ABSENT, Description
from bridge.suite.load import LoadedSuite, load_suite
from bridge.suite.problems import SuiteError
from bridge.suite.run import CaseResult, run_suite
from bridge.trial.stdout_pipe import reader_may_leave

EXIT_OK, EXIT_FAILED, EXIT_BAD_SUITE, EXIT_CALL_FAILED = 0, 1, 2, 3


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("suites", nargs="+", metavar="SUITE",
                   help="suite files (YAML; schemas/test/suite.schema.json), or directories: "
                        "their *.yaml and *.yml files")
    p.add_argument("--case", metavar="PATTERN", action="append", default=[],
                   help="run only the cases whose name this regular expression is found in "
                        "(repeatable: any of them); every suite is still checked whole")
    p.add_argument("--output", choices=("text", "json"), default="text",
                   help="json: one object per case and line (suite, case, status, expected "
                        "and got per mismatch, errors)")
    p.add_argument("--junit", metavar="FILE", help="also write the results as JUnit XML")


def suite_paths(args: list[str]) -> list[str]:
    """The suite files `args` name: files as given, directories as their YAML files."""
    out: list[str] = []
    for arg in args:
        if Path(arg).is_dir():
            out += sorted(str(p) for p in Path(arg).iterdir()
                          if p.suffix in (".yaml", ".yml") and p.is_file())
        else:
            out.append(arg)
    return out


def main(args: argparse.Namespace) -> int:
    try:
        patterns = [re.compile(p) for p in args.case]
    except re.error as exc:
        print(f"nri-webhook-bridge test: --case: not a regular expression: {exc}",
              file=sys.stderr)
        return EXIT_BAD_SUITE
    suites, bad = [], []
    for path in suite_paths(args.suites):  # every bad suite, with every problem it has
        try:
            suites.append(load_suite(path))
        except SuiteError as exc:
            bad.append(exc)
    if args.junit and (problem := _unwritable(args.junit)):
        print(f"nri-webhook-bridge test: --junit {args.junit}: {problem}", file=sys.stderr)
        return EXIT_BAD_SUITE
    if bad:
        for error in bad:
            _bad_suite(error)
        return EXIT_BAD_SUITE
    if not suites:
        print("nri-webhook-bridge test: no suite files", file=sys.stderr)
        return EXIT_BAD_SUITE
    if patterns:
        suites = [s for s in (_only(s, patterns) for s in suites) if s.cases]
        if not suites:
            print(f"nri-webhook-bridge test: --case {' '.join(args.case)}: matches no case",
                  file=sys.stderr)
            return EXIT_BAD_SUITE
    # The simulator warns of every rejected or failed event; each case's line already says it.
    logging.getLogger("bridge.simulator").setLevel(logging.ERROR)
    show = _json_line if args.output == "json" else _print
    try:
        results = asyncio.run(_run(suites, _quietly(show)))
    except SuiteError as exc:
        _bad_suite(exc)
        return EXIT_BAD_SUITE
    except OSError as exc:
        print(f"nri-webhook-bridge test: cannot run: {exc}", file=sys.stderr)
        return EXIT_FAILED
    failed = sum(1 for r in results if not r.ok)
    if args.output == "text":
        with reader_may_leave():
            print(f"{len(results) - failed} passed, {failed} failed")
    if args.junit:
        try:
            junit.write(results, args.junit)
        except OSError as exc:
            print(f"nri-webhook-bridge test: --junit: {exc}", file=sys.stderr)
            return EXIT_BAD_SUITE
    if any(r.calls_failed for r in results):
        return EXIT_CALL_FAILED
    return EXIT_FAILED if failed else EXIT_OK


def _only(suite: LoadedSuite, patterns: list[re.Pattern[str]]) -> LoadedSuite:
    return dataclasses.replace(suite, cases=tuple(
        c for c in suite.cases if any(p.search(c.name) for p in patterns)))


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


async def _run(suites: list[LoadedSuite],
               show: Callable[[CaseResult], None]) -> list[CaseResult]:
    results: list[CaseResult] = []
    for suite in suites:
        results += await run_suite(suite, show)
    return results


def _bad_suite(exc: SuiteError) -> None:
    for line in str(exc).splitlines():
        print(f"nri-webhook-bridge test: {line}", file=sys.stderr)


def _quietly(show: Callable[[CaseResult], None]) -> Callable[[CaseResult], None]:
    """`show`, whose writes end quietly when stdout's reader leaves (`test ... | head`): the
    cases still run, and the exit code still says how they went."""
    def shown(result: CaseResult) -> None:
        with reader_may_leave():
            show(result)
    return shown


def _print(result: CaseResult) -> None:
    print(f"{'PASS' if result.ok else 'FAIL'} {result.suite.path}: {result.name}", flush=True)
    for line in (result.error or "").splitlines():
        print(f"    error: {line}")
    for mismatch in result.mismatches:
        print(mismatch.render())


def _json_line(result: CaseResult) -> None:
    status = "pass" if result.ok else "error" if result.error is not None else "fail"
    line = {"suite": result.suite.path, "case": result.name, "status": status,
            "duration_s": round(result.duration_s, 3),
            "errors": (result.error or "").splitlines(), "calls_failed": result.calls_failed,
            "mismatches": [{"where": m.where, "expected": _value(m.expected),
                            "got": _value(m.got)} for m in result.mismatches]}
    print(json.dumps(line, sort_keys=True), flush=True)


def _value(value: Any) -> Any:
    """A value as JSON: an absent path as null, a description as its text."""
    if value is ABSENT:
        return None
    if isinstance(value, Description):
        return str(value)
    return value
