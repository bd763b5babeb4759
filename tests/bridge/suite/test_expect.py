"""Expectations against `try`'s result objects: paths, values, verdicts, warnings, diffs."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.suite.document import Expectation
from bridge.suite.expect import ABSENT, check_expectation, lookup, matches


def result(**over: Any) -> dict[str, Any]:
    """One container as `try --output json` gives it (only the keys the checks read)."""
    base: dict[str, Any] = {
        "pod": "shop/web-5d4f-abcde", "container": "app", "kind": "container",
        "qos_class": "Burstable", "cgroup_parent": "/kubepods/burstable/pod1234",
        "adjust": {}, "update": {}, "reject": None, "warnings": [], "runtime": [],
        "effective": {"resources": {"cpu": {"cpus": "2-3", "shares": 512},
                                    "unified": {"memory.swap.max": "0"}},
                      "oom_score_adj": -997, "env": ["PATH=/bin", "TEAM=payments"],
                      "annotations": {"example.com/team": "payments"}}}
    return {**base, **over}


def expect(**fields: Any) -> Expectation:
    return Expectation.model_validate({"pod": "shop/web-*", **fields})


def test_lookup_finds_keys_that_contain_dots_and_list_items() -> None:
    effective = result()["effective"]
    assert lookup(effective, "resources.unified.memory.swap.max") == "0"
    assert lookup(effective, "annotations.example.com/team") == "payments"
    assert lookup(effective, "env.1") == "TEAM=payments"
    assert lookup(effective, "env.-1") == "TEAM=payments"
    assert lookup(effective, "env.2") is ABSENT
    assert lookup(effective, "resources.cpu.quota") is ABSENT
    assert lookup(effective, "oom_score_adj.x") is ABSENT


@pytest.mark.parametrize(("expected", "got", "ok"), [
    (-997, -997, True),
    ("2-3", "2-3", True),
    ("2", 2, False),            # a string is not a number
    (1, True, False),           # nor is a boolean
    (None, ABSENT, True),       # null: absent
    (None, 0, False),
    ({"contains": "TEAM=payments"}, ["PATH=/bin", "TEAM=payments"], True),
    ({"contains": ["TEAM=payments", "PATH=/bin"]}, ["PATH=/bin", "TEAM=payments"], True),
    ({"contains": "TEAM=data"}, ["TEAM=payments"], False),
    ({"contains": "example.com/team"}, {"example.com/team": "x"}, True),
    ({"contains": "ments"}, "payments", True),
    ({"contains": "x"}, ABSENT, False),
    ({"not_contains": "TEAM=data"}, ["TEAM=payments"], True),
    ({"not_contains": "TEAM=payments"}, ["PATH=/bin", "TEAM=payments"], False),
    ({"not_contains": ["TEAM=data", "PATH=/bin"]}, ["PATH=/bin", "TEAM=payments"], False),
    ({"not_contains": ["TEAM=data", "X=1"]}, ["PATH=/bin", "TEAM=payments"], True),
    ({"not_contains": "example.com/team"}, {"example.com/team": "x"}, False),
    ({"not_contains": "example.com/owner"}, {"example.com/team": "x"}, True),
    ({"not_contains": "ments"}, "payments", False),
    ({"not_contains": "data"}, "payments", True),
    ({"not_contains": "x"}, ABSENT, True),      # an absent value contains nothing
    ({"not_contains": 2}, 2, True),             # nor does a number
    ({"matches": "^kubepods-"}, "kubepods-burstable.slice", True),
    ({"matches": "payments"}, {"team": "payments"}, True),   # other values as JSON
    ({"cpus": "2-3"}, {"cpus": "2-3"}, True),                 # a mapping that is no operator
])
def test_matches(expected: Any, got: Any, ok: bool) -> None:
    assert matches(expected, got) is ok


def test_a_passing_expectation_has_no_mismatches() -> None:
    objects = [result(adjust={"koordinator-qos": {"linux": {"resources": {"cpu": {
        "cpus": "2-3"}}}}}, warnings=[{"webhook": "k", "event": "CreateContainer",
                                       "message": "pod has no team"}])]
    e = expect(container="app", verdict="adjusted", qos_class="Burstable",
               cgroup_parent="^/kubepods/burstable/", adjust={"linux.resources.cpu.cpus": "2-3"},
               effective={"oom_score_adj": -997, "resources.cpu.quota": None},
               warnings=["has no team"])
    assert check_expectation(e, objects) == []


def test_verdict_and_values_that_differ_are_each_reported() -> None:
    objects = [result(reject={"webhook": "no-latest", "event": "CreateContainer",
                              "reason": "image app:latest uses :latest"}, effective=None)]
    mismatches = check_expectation(expect(verdict="adjusted", effective={"oom_score_adj": -997}),
                                   objects)
    assert [m.where for m in mismatches] == ["shop/web-5d4f-abcde app: verdict",
                                             "shop/web-5d4f-abcde app: effective oom_score_adj"]
    assert mismatches[0].render().splitlines()[1:] == [
        "      expected: adjusted",
        "      got:      rejected (no-latest, CreateContainer: image app:latest uses :latest)"]
    assert "got:      <never created>" in mismatches[1].render()


def test_a_reject_pattern_implies_the_verdict_and_is_searched_in_the_reason() -> None:
    rejected = [result(reject={"webhook": "w", "event": "CreateContainer",
                               "reason": "image app:latest uses :latest"})]
    assert check_expectation(expect(reject="uses :latest$"), rejected) == []
    assert [m.where for m in check_expectation(expect(reject="forbidden"), rejected)] == [
        "shop/web-5d4f-abcde app: reject reason"]
    assert [m.where for m in check_expectation(expect(reject="x"), [result()])] == [
        "shop/web-5d4f-abcde app: verdict"]


def test_webhook_scopes_the_verdict_adjustment_and_warnings() -> None:
    objects = [result(adjust={"a": {"env": [{"key": "A", "value": "1"}]}},
                      warnings=[{"webhook": "a", "event": "CreateContainer", "message": "hi"}])]
    assert check_expectation(expect(webhook="b", verdict="unchanged", warnings=[]), objects) == []
    assert check_expectation(expect(webhook="a", verdict="adjusted", warnings=["hi"]),
                             objects) == []
    assert check_expectation(expect(adjust={"env.0.key": "A"}), objects) == []


def test_empty_warnings_means_none_and_each_pattern_must_match_one() -> None:
    objects = [result(warnings=[{"webhook": "a", "event": "E", "message": "one"}])]
    (none,) = check_expectation(expect(warnings=[]), objects)
    assert none.expected == [] and none.got == ["one"]
    (missing,) = check_expectation(expect(warnings=["one", "two"]), objects)
    assert "one matching /two/" in missing.render()


def test_no_matching_container_lists_what_there_is() -> None:
    (m,) = check_expectation(expect(container="db"), [result()])
    assert m.where == "pod shop/web-* container db"
    assert m.got == ["shop/web-5d4f-abcde app"]
    # a bare name: any ns
    assert check_expectation(Expectation(pod="web-5d4f-abcde"), [result()]) == []


def test_structured_values_differ_as_a_unified_diff() -> None:
    objects = [result(adjust={"a": {"env": [{"key": "TEAM", "value": "data"}]}})]
    (m,) = check_expectation(expect(adjust={"env": [{"key": "TEAM", "value": "payments"}]}),
                             objects)
    text = m.render()
    assert "--- expected" in text and "+++ got" in text
    assert '-    "value": "payments"' in text and '+    "value": "data"' in text
