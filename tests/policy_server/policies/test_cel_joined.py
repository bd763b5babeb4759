"""The ``cel`` policy joins the programs of every NodePolicy in force on an event into one.

A request answered by several NodePolicies pays one evaluation (one call into cel-cpp, one
conversion of the bound request) instead of one per policy. The joined answers must be exactly
each policy's own: the example NodePolicies together with policies that error (Ignore and Fail),
do not apply, mutate, annotate and have no program are run over request variants both ways
(joined, and each policy alone as without the joined program), comparing every answer, decision,
count and reply; the variants reach the joined answer and its fallback (one policy's error fails
the whole list, and each policy then runs alone)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from policy_server import EventName
from policy_server.policies.cel import policy_program, policy_set
from policy_server.policies.cel.policy_program import NOT_RUN
from policy_server.policies.cel.policy_set import PolicySet
from policy_server.policies.cel.program import evaluate, evaluate_all
from policy_server.policies.cel.tally import Tally
from policy_server.testing import PolicyRunner

REPO = Path(__file__).resolve().parents[3]
BASE = json.loads((REPO / "schemas/webhook/examples/CreateContainer.request.json").read_text())
EVENT = EventName.CREATE_CONTAINER
HEAD = "apiVersion: nri-webhook-bridge.io/v1alpha1\nkind: NodePolicy\n"
SHAPES = {
    # Errors without a 'tier' label: Ignore makes it a warning.
    "tier-gold": """\
  failurePolicy: Ignore
  validations:
    - expression: "pod.labels['tier'] == 'gold'"
      message: "gold only"
  validationActions: [Warn]
""",
    "no-sidecar": """\
  matchConditions:
    - {name: system, expression: "pod.namespace != 'kube-system'"}
  validations:
    - expression: "container.name != 'sidecar'"
      messageExpression: "'no ' + container.name"
""",
    "name-env": """\
  matchConditions:
    - {name: system, expression: "pod.namespace != 'kube-system'"}
  mutations:
    - expression: "{'env': [{'key': 'NAME', 'value': container.name}]}"
""",
    # Params without a CEL literal: no program of its own, so not in the joined one.
    "dated": """\
  validations:
    - expression: "container.name != 'bad'"
  params: {since: 2024-01-01}
""",
    # Errors without a memory limit: Fail rejects.
    "limit-set": """\
  failurePolicy: Fail
  validations:
    - expression: "container.linux.resources.memory.limit > 0"
""",
    "namespace-note": """\
  auditAnnotations:
    - {key: ns, valueExpression: "pod.namespace"}
""",
}


def policy_dir(tmp_path: Path) -> Path:
    for example in (REPO / "examples/policies/cel").glob("*.yaml"):
        shutil.copy(example, tmp_path / example.name)
    shutil.copytree(REPO / "examples/policies/cel/params", tmp_path / "params")
    for name, spec in SHAPES.items():
        (tmp_path / f"{name}.yaml").write_text(
            f"{HEAD}metadata: {{name: {name}}}\nspec:\n  events: [CreateContainer]\n{spec}")
    return tmp_path


def variants() -> list[dict[str, Any]]:
    pod, ctr = BASE["pod"], BASE["container"]
    gold = {**pod, "labels": {"tier": "gold"}}
    no_memory = json.loads(json.dumps(ctr))
    no_memory["linux"]["resources"].pop("memory")
    return [
        BASE,
        {**BASE, "pod": gold},
        {**BASE, "pod": {**gold, "namespace": "kube-system"}},
        {**BASE, "pod": gold, "container": {**ctr, "name": "sidecar"}},
        {**BASE, "pod": gold, "container": {**ctr, "name": "bad"}},
        {**BASE, "pod": gold, "container": no_memory},
        {**BASE, "pod": {**gold, "annotations": {"example.com/memory": "512Mi"}}},
        {**BASE, "pod": gold, "container": {**ctr, "annotations": {
            "io.kubernetes.cri.image-name": "busybox:latest"}}},
        {**BASE, "pod": {**gold, "labels": {"tier": "gold", "example.com/pool": "batch"}}},
    ]


def test_the_policies_of_an_event_are_joined(tmp_path: Path) -> None:
    in_force = PolicySet(policy_dir(tmp_path)).by_event
    create = in_force[EVENT]
    assert create.program is not None
    assert len(create.policies) == 10
    # Every policy with a program is in the joined one; the one without is not.
    assert [p.name for p, plain in zip(create.policies, create.plains, strict=True)
            if plain is None] == ["dated"]
    # One policy on an event: its own program is the joined one.
    assert in_force[EventName.VALIDATE_CONTAINER_ADJUSTMENT].program is None


def test_joined_answers_are_each_policys_own_and_decide_and_count_alike(tmp_path: Path) -> None:
    policies = PolicySet(policy_dir(tmp_path))
    in_force = policies.by_event[EVENT]
    joined_answered = fell_back = 0
    outcomes = set()
    for variant in variants():
        body = orjson.dumps(variant)
        request = in_force.view.decode(body)
        found = policy_program.run_joined(in_force.program, request, in_force.plains)
        if all(answer is NOT_RUN for answer in found):
            fell_back += 1
        else:
            joined_answered += 1
            for policy, answer in zip(in_force.policies, found, strict=True):
                if policy.program is None:
                    assert answer is NOT_RUN
                else:
                    alone = policy_program.run(policy.program, request, policy.plain)
                    assert answer == alone, (policy.name, variant)
        want_tally, got_tally = Tally(), Tally()
        want = []
        for policy in in_force.policies:  # each alone, expression by expression
            exact = dataclasses.replace(policy, program=None)
            decision = evaluate(exact, EVENT, orjson.loads(body), want_tally)
            if decision is not None:
                want.append((policy.name, decision))
        got = evaluate_all(in_force, EVENT, body, got_tally)
        assert got == want, variant
        assert got_tally.counts() == want_tally.counts(), variant
        outcomes.add(repr(want))
    assert joined_answered >= 3 and fell_back >= 2  # both ways are reached
    assert len(outcomes) >= 5  # ... and the variants tell the policies' answers apart


def test_the_reply_is_the_same_without_the_joined_program(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = policy_dir(tmp_path)
    joined = PolicyRunner.builtin("cel", path)
    monkeypatch.setattr(policy_set, "joined_program", lambda policies: None)
    alone = PolicyRunner.builtin("cel", path)
    replies = set()
    for variant in variants():
        got, want = joined.send(variant).json, alone.send(variant).json
        assert got == want, variant
        replies.add(json.dumps(got, sort_keys=True))
    assert len(replies) >= 4


def test_a_joined_program_that_fails_leaves_each_policy_to_run_alone(tmp_path: Path) -> None:
    in_force = PolicySet(policy_dir(tmp_path)).by_event[EVENT]
    no_tier = in_force.view.decode(orjson.dumps(BASE))  # tier-gold errors on it
    found = policy_program.run_joined(in_force.program, no_tier, in_force.plains)
    assert found == (NOT_RUN,) * len(in_force.policies)
    decisions = dict(evaluate_all(in_force, EVENT, orjson.dumps(BASE), Tally()))
    assert decisions["tier-gold"].warnings[0].startswith("tier-gold: ignored (failurePolicy")
    assert decisions["name-env"].adjust is not None  # the others still answer


class Counted:
    """A program that counts its evaluations."""

    def __init__(self, program: Any) -> None:
        self.program, self.calls = program, 0

    def eval(self, **kwargs: Any) -> Any:
        self.calls += 1
        return self.program.eval(**kwargs)


def test_a_request_pays_one_evaluation_when_the_joined_program_answers(tmp_path: Path) -> None:
    in_force = PolicySet(policy_dir(tmp_path)).by_event[EVENT]
    joined = Counted(in_force.program)
    alone = [dataclasses.replace(p, program=Counted(p.program)) if p.program is not None else p
             for p in in_force.policies]
    counted = in_force._replace(program=joined, policies=tuple(alone))
    gold = orjson.dumps({**BASE, "pod": {**BASE["pod"], "labels": {"tier": "gold"}}})
    assert evaluate_all(counted, EVENT, gold, Tally())
    assert joined.calls == 1
    assert [p.name for p in alone if isinstance(p.program, Counted) and p.program.calls] == []
    evaluate_all(counted, EVENT, orjson.dumps(BASE), Tally())  # tier-gold errors: each alone
    assert joined.calls == 2
    assert all(p.program.calls == 1 for p in alone if isinstance(p.program, Counted))
