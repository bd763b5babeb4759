"""The runner's own mutation check (issue 34): for every example suite, every expectation is
changed one way at a time — a value, a path, a name, a verdict — and each change must make the
case fail (an expectation that does not hold, or a suite refused before it runs), not only the
first change of a case. A change that still passes is an expectation that holds whatever the
policy does, which is what a test runner must never allow.

Each suite runs once for real (bridge.suite.run: a private policy server, the bridge, the
simulator); the changed expectations are then checked against the same results, as the runner
would check them (bridge.suite.checks before running, bridge.suite.expect after)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from bridge.suite.checks import names_problems, webhook_problems
from bridge.suite.document import OPERATORS, Expectation
from bridge.suite.expect import check_expectation
from bridge.suite.load import LoadedSuite, load_suite
from bridge.suite.run import CaseResult, run_suite

pytestmark = pytest.mark.processes  # starts processes: not in make check

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((REPO / "examples" / "tests").glob("*.yaml"))
VERDICTS = ("adjusted", "unchanged", "rejected")
QOS = ("Guaranteed", "Burstable", "BestEffort")


def other_value(value: Any) -> Any:
    """A value that `value` as an expectation must not accept where `value` is accepted."""
    if isinstance(value, dict) and len(value) == 1 and next(iter(value)) in OPERATORS:
        ((operator, operand),) = value.items()
        if operator == "not_contains":
            return {"contains": operand}  # held because the value lacks it
        return {operator: "^mutant$" if operator == "matches" else f"{operand}-mutant"}
    if value is None:
        return "mutant"  # null (absent) -> something present
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, str):
        return value + "-mutant"
    if isinstance(value, list):
        return [*value, "mutant"]
    return {**value, "mutant": 1}


def mutants(e: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(what changed, the changed expectation), one change each."""
    yield "pod name", {**e, "pod": e["pod"] + "-mutant"}
    for key in ("container", "webhook"):
        if e.get(key) is not None:
            yield f"{key} name", {**e, key: e[key] + "-mutant"}
    if e.get("verdict") is not None:
        for verdict in VERDICTS:
            if verdict != e["verdict"]:
                yield f"verdict {verdict}", {**e, "verdict": verdict}
    if e.get("qos_class") is not None:
        yield "qos_class", {**e, "qos_class": next(q for q in QOS if q != e["qos_class"])}
    if e.get("cgroup_parent") is not None:
        yield "cgroup_parent", {**e, "cgroup_parent": "^/mutant$"}
    if e.get("reject") is not None:
        yield "reject", {**e, "reject": "^mutant$"}
    if e.get("warnings") is not None:
        yield "warnings", {**e, "warnings": [*e["warnings"], "^mutant$"]}
        for i in range(len(e["warnings"])):
            yield f"warnings[{i}]", {**e, "warnings": [
                "^mutant$" if j == i else w for j, w in enumerate(e["warnings"])]}
    for kind in ("adjust", "effective"):
        for path, value in (e.get(kind) or {}).items():
            yield f"{kind} {path} value", {**e, kind: {**e[kind], path: other_value(value)}}
            renamed = {(f"{p}-mutant" if p == path else p): v for p, v in e[kind].items()}
            yield f"{kind} {path} path", {**e, kind: renamed}


def fails(changed: dict[str, Any], suite: LoadedSuite, index: int, result: CaseResult) -> bool:
    """The runner would fail the case (or refuse the suite) with `changed` in its place."""
    try:
        e = Expectation.model_validate(changed)
    except ValidationError:
        return True
    case = suite.cases[index]
    return bool(names_problems([e], case.pods, index, {})
                or webhook_problems([(index, [e])], list(result.webhooks), {})
                or check_expectation(e, list(result.objects)))


@pytest.fixture(scope="module")
def ran() -> dict[Path, tuple[LoadedSuite, list[CaseResult]]]:
    logging.getLogger("bridge.simulator").setLevel(logging.ERROR)
    suites = {path: load_suite(str(path)) for path in EXAMPLES}
    return {path: (suite, asyncio.run(run_suite(suite))) for path, suite in suites.items()}


@pytest.mark.timeout(600)  # the example suites once: about 30 s when idle
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_change_of_every_expectation_fails(
        ran: dict[Path, tuple[LoadedSuite, list[CaseResult]]], path: Path) -> None:
    suite, results = ran[path]
    assert all(r.ok for r in results), [(r.name, r.error, r.mismatches) for r in results]
    survivors, tried = [], 0
    for index, (case, result) in enumerate(zip(suite.cases, results, strict=True)):
        for j, expectation in enumerate(case.expect):
            original = expectation.model_dump(exclude_unset=True)
            for what, changed in mutants(original):
                tried += 1
                if not fails(changed, suite, index, result):
                    survivors.append(f"{case.name}: expect[{j}]: {what}")
    assert tried > 0
    assert survivors == [], "changed expectations that still pass:\n" + "\n".join(survivors)
