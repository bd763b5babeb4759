"""Every range and grammar of the reply contract, walked through everything that checks a reply.

For each rule of bridge.contract.value_rules (and the reply's own limits), a value just inside
is accepted and a value just outside refused by the policy SDK (building the value), by
`jsonschema` with the published schema, and by the bridge's reply guard, each naming the same
field path. A CPU list's order (``3-1``) and id bound (``65536``) are past what a pattern can
say: the schema names them by ``format: cpu-list``; plain `jsonschema` accepts those two and a
reader implementing the format refuses them (both asserted, so the gap is exact, not hidden).

On main (before the declaration) the schema and the SDK took cpu shares 1, a quota of 5, a
period of 0, a CPU list ``0, 1``, an env name ``A=B`` ... and the bridge cut a 4097-character
reason and warning: the walk fails there (run with `git stash` on the source change).
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from bridge.contract import value_docs, value_rules
from bridge.contract.schema import SCHEMA_DIR, build, render
from bridge.webhooks import reply_walk, values
from tests.bridge.contract import range_walk
from tests.bridge.contract.range_walk import Case

CASES = list(range_walk.cases())


def test_the_walk_covers_every_rule_in_adjust_and_update() -> None:
    paths = {case.path for case in CASES}
    for rule in value_rules.RULES:
        assert f"adjust.{value_rules.json_path(rule)}" in paths
        if rule.path.startswith(value_rules.UPDATE_PREFIX):
            assert f"update[0].{value_rules.json_path(rule)}" in paths
    assert sum(not c.inside for c in CASES) > len(value_rules.RULES)  # an outside value each
    assert {"warnings", "warnings[0]", "reject.reason"} <= paths


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name[:80])
def test_every_checker_agrees_on_the_edge(case: Case) -> None:
    want = None if case.inside else case.path
    assert range_walk.sdk(case) == want, "SDK"
    assert range_walk.schema(case, formats=True) == want, "published schema (with formats)"
    assert range_walk.schema(case) == (None if case.needs_format else want), "published schema"
    assert range_walk.bridge(case) == want, "bridge"
    if "adjust" in case.reply or "update" in case.reply:  # what a CEL mutation can write
        assert range_walk.cel(case) == want, "cel mutation"


def test_only_the_cpu_list_needs_its_format() -> None:
    """The gap between the plain schema and the contract is exactly the CPU list's order and id
    bound (a pattern cannot say them), not something a pattern could have said."""
    gaps = {case.name.split("=", 1)[1] for case in CASES if case.needs_format}
    assert gaps == {"'3-1'", f"'{value_rules.MAX_CPU_ID + 1}'"}


# -- each checker fails on a mutated rule (the walk is not vacuous) ------------------------------

def _mutated(monkeypatch: pytest.MonkeyPatch, path: str, check: Any) -> None:
    rules = tuple(value_rules.Rule(r.path, check, r.keys) if r.path == path else r
                  for r in value_rules.RULES)
    monkeypatch.setattr(values, "RULES", rules)


def test_a_bridge_check_one_wider_than_the_contract_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _mutated(monkeypatch, "linux.resources.cpu.shares", value_rules.IntRange(1, 262144))
    monkeypatch.setattr(reply_walk, "CHECKS", values._checks())
    shares = next(c for c in CASES if c.name == "adjust.linux.resources.cpu.shares=1")
    assert range_walk.bridge(shares) is None  # the mutant takes what the contract refuses
    assert range_walk.sdk(shares) == range_walk.schema(shares) == shares.path


def test_a_schema_without_the_rule_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A published schema generated without the value rules (the schema of main) takes the
    outside values: the walk's schema leg would fail."""
    from bridge.contract import reply_models
    monkeypatch.setattr(reply_models, "RULES_BY_FIELD", {})
    monkeypatch.setattr(reply_models, "REPLY_MODELS", {})
    model = reply_models.reply_nri_model("LinuxCPU")
    assert model.model_json_schema()["properties"]["shares"]["anyOf"][0]["minimum"] == 0


def test_the_published_schemas_are_generated_from_the_rules() -> None:
    """schemas/webhook/ is what `python -m bridge.contract.schema` writes today."""
    for rel, doc in build().items():
        assert (SCHEMA_DIR / rel).read_text() == render(doc), rel


def test_request_schemas_carry_no_reply_rule() -> None:
    """A runtime's values are what they are: the request's CPU and memory keep the proto's
    integer ranges, the reply's carry the contract's."""
    docs = build()
    request = docs["request.schema.json"]["$defs"]["LinuxCPU"]["properties"]["shares"]
    reply = docs["reply.schema.json"]["$defs"]["LinuxCPU"]["properties"]["shares"]
    assert request["anyOf"][0]["minimum"] == 0 and reply["anyOf"][0]["minimum"] == 2
    # No reply grammar either: the request's only key bound is the decoder's length limit
    # (bridge.contract.field_limits), never a reply key pattern or the cpu-list format.
    text = str(docs["request.schema.json"])
    assert "'pattern'" not in text and "cpu-list" not in text
    assert "propertyNames': {'maxLength'" in text


def test_the_docs_tables_are_generated_from_the_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/webhooks.md's value ranges are today's rendering; a changed rule changes it."""
    text = value_docs.DOC.read_text()
    assert value_docs.rendered(text) == text, "run python -m bridge.contract.schema"
    assert "| `linux.resources.cpu.shares` (also in `update`) | 2 to 262144 |" in text
    wider = tuple(value_rules.Rule(r.path, value_rules.IntRange(1, 262144))
                  if r.path.endswith("cpu.shares") else r for r in value_rules.RULES)
    monkeypatch.setattr(value_rules, "RULES", wider)
    assert value_docs.rendered(text) != text


def test_each_leg_fails_when_its_check_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mutations: the SDK's limit check, the bridge's value checks and the schema's keywords
    each turned off make the walk see the outside values accepted (the legs are not vacuous)."""
    outside = [c for c in CASES if not c.inside and c.path.startswith(("adjust", "update"))]
    from policy_server.sdk.limit_checks import Limit
    with monkeypatch.context() as patch:
        patch.setattr(Limit, "refusal", lambda self, value: None)
        assert all(range_walk.sdk(c) is None for c in outside)
    with monkeypatch.context() as patch:
        patch.setattr(reply_walk, "CHECKS", {})
        accepted = [c for c in outside if range_walk.bridge(c) is None]
        # refused before the value checks: a '-' key (the removal marker) and a negative
        # swappiness (an unsigned proto field); everything else passes
        assert [c.name for c in outside if c not in accepted] == [
            "adjust.linux.sysctl='-net'", "adjust.linux.resources.memory.swappiness=-1",
            "update[0].linux.resources.memory.swappiness=-1"]
    keywords = ("minimum", "maximum", "pattern", "propertyNames", "format", "minLength")
    stripped = {k: v for k, v in range_walk._validator("CreateContainer", True).schema.items()}
    text = json.dumps(stripped)
    for word in keywords:
        text = text.replace(f'"{word}":', f'"x-{word}":')
    validator = jsonschema.Draft202012Validator(json.loads(text))
    assert all(not list(validator.iter_errors(c.reply)) for c in outside)
