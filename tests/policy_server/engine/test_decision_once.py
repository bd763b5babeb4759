"""The merged Decision is built once and its warnings fitted once, at the encoder (issue 44.3).

The steps after the handlers (the merge, the failure policy, the node and event fits, the settle
step's effects, rdt_class rule and pushes) used to rebuild the Decision, each rebuild checking
every value again, and to cut the warnings to the contract's 100 each time: a note added after a
cut made the "... and N more warnings" count wrong. Now the handlers' values are checked once,
when the handlers build them, and the count is that of every warning dropped.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from policy_server import Adjustment, Decision, Event, EventName, Policy, ResourcePatch
from policy_server.exceptions import PolicyError
from policy_server.sdk import decision as decision_module
from policy_server.sdk import resource_patch
from policy_server.sdk.effects import CgroupWrite
from policy_server.sdk.limit_checks import MAX_WARNINGS
from policy_server.sdk.node_facts import NodeFacts
from policy_server.testing import PolicyRunner, make_request

ROOT = Path(__file__).parents[3]
CREATE = make_request("CreateContainer")
CHECKS = ("_check_decision", "_check_adjustment", "_check_update")


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """How often each SDK value type's contract check ran."""
    counted: Counter[str] = Counter()

    def counting(name: str, check: object) -> object:
        def run(value: object) -> None:
            counted[name] += 1
            check(value)  # type: ignore[operator]
        return run

    for name in CHECKS:
        monkeypatch.setattr(decision_module, name, counting(name, getattr(decision_module, name)))
    monkeypatch.setattr(resource_patch, "_check_patch",
                        counting("_check_patch", resource_patch._check_patch))
    yield counted


def _busy() -> tuple[Policy[None], list[Decision]]:
    """Two handlers that both adjust and both warn 100 times, one failing under Ignore; on a
    cgroup v1 node its unified key is dropped, and its pod cgroup write is not applied."""
    policy = Policy("busy")
    built: list[Decision] = []

    @policy.on(EventName.CREATE_CONTAINER)
    def shares(event: Event) -> Decision:
        built.append(Decision(
            adjust=Adjustment(resources=ResourcePatch(cpu_shares=512,
                                                      unified={"memory.high": "max"})),
            warnings=tuple(f"a{i}" for i in range(MAX_WARNINGS))))
        return built[-1]

    @policy.on(EventName.CREATE_CONTAINER)
    def env(event: Event) -> Decision:
        built.append(Decision(
            adjust=Adjustment(env={"A": "1"}),
            effects=(CgroupWrite("kubepods/pod1", "cpu.shares", 2),),
            warnings=tuple(f"b{i}" for i in range(MAX_WARNINGS))))
        return built[-1]

    @policy.on(EventName.CREATE_CONTAINER)
    def fails(event: Event) -> Decision:
        raise PolicyError("no answer")

    return policy, built


def test_the_values_are_checked_once_when_the_handlers_build_them(
        checks: Counter[str]) -> None:
    policy, built = _busy()
    kit = PolicyRunner(policy, facts=NodeFacts(cgroup_version=1))
    checks.clear()
    reply = kit.send(CREATE)
    assert len(built) == 2
    # One check per value a handler built (two decisions, two adjustments, two patches, the
    # empty default patch of the one without resources is shared); nothing checked again.
    assert checks == Counter({"_check_decision": 2, "_check_adjustment": 2, "_check_patch": 1})
    assert reply.adjust == {"env": [{"key": "A", "value": "1"}],
                            "linux": {"resources": {"cpu": {"shares": 512}}}}


def test_the_warnings_are_fitted_once_and_the_count_of_those_dropped_is_right() -> None:
    policy, _ = _busy()
    reply = PolicyRunner(policy, facts=NodeFacts(cgroup_version=1)).send(CREATE)
    # 200 from the handlers, then the failing handler's, the dropped unified key's and the
    # write not applied: 203 warnings, 99 kept, the 100th says 104 more went.
    assert len(reply.warnings) == MAX_WARNINGS
    assert reply.warnings[:2] == ["a0", "a1"] and reply.warnings[98] == "a98"
    assert reply.warnings[-1] == "... and 104 more warnings"
    notes = reply.settled.notes
    assert notes[0] == "fails: no answer" and notes[1].startswith("unified memory.high dropped")
    assert notes[2].startswith("pod cgroup writes not applied (executor off)")


def test_one_handlers_decision_is_the_replys_as_it_is() -> None:
    """Nothing to join: the handler's own Decision is the settled one, its effects' warning
    beside it, not a rebuilt copy."""
    policy = Policy("one")
    built: list[Decision] = []

    @policy.on(EventName.CREATE_CONTAINER)
    def only(event: Event) -> Decision:
        built.append(Decision(adjust=Adjustment(env={"A": "1"}),
                              effects=(CgroupWrite("kubepods/pod1", "cpu.shares", 2),)))
        return built[-1]

    reply = PolicyRunner(policy).send(CREATE)
    assert reply.settled.decision is built[0] and reply.evaluation.decision is built[0]
    assert reply.warnings == ["pod cgroup writes not applied (executor off): kubepods/pod1: "
                              "cpu.shares=2"]


def test_the_policy_server_fits_warnings_in_one_place() -> None:
    """``fit_warnings`` / ``fit_reject`` are called by the reply encoder only (they were called
    at six places); a second caller fails this test."""
    calls = re.compile(r"\bfit_(?:warnings|reject)\(")
    callers = sorted(
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "policy_server").rglob("*.py")
        if any(calls.search(line) and not line.lstrip().startswith("def ")
               for line in path.read_text().splitlines())
    )
    assert callers == ["policy_server/engine/reply.py"]
