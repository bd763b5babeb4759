"""The ``cel`` policy's one program per NodePolicy: its shapes and its params literal.

Each shape the program takes (conditions as one ``&&``, validations as one ``&&`` before their
outcomes are listed, audit annotations and mutations listed, no variables) is run both ways on
requests that make every part hold, fail and error, and must decide and count exactly as the
exact path does; the params are written into the program as a literal that must evaluate to
what binding them gives."""

from __future__ import annotations

import dataclasses
import datetime
import json
from pathlib import Path
from typing import Any

import pytest

from policy_server import EventName
from policy_server.policies.cel import policy_program
from policy_server.policies.cel.compiler import eval_env
from policy_server.policies.cel.policy_set import PolicySet
from policy_server.policies.cel.program import evaluate
from policy_server.policies.cel.tally import Tally

REPO = Path(__file__).resolve().parents[3]
BASE = json.loads((REPO / "schemas/webhook/examples/CreateContainer.request.json").read_text())
HEAD = "apiVersion: nri-webhook-bridge.io/v1alpha1\nkind: NodePolicy\n"
EVENT = EventName.CREATE_CONTAINER


def tagged(value: Any) -> Any:
    """``value`` with its types spelt out: 1, 1.0 and True are not equal here."""
    if isinstance(value, dict):
        return ("map", sorted((json.dumps(tagged(k)), tagged(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("list", [tagged(v) for v in value])
    return (type(value).__name__, value)


PARAMS = [
    {}, {"maxBytes": 8589934592, "minShares": 2}, None, True, -7, 2**63 - 1, -(2**63) + 1,
    1.5, -0.0, 1e300, 2.5e-7, "", "it's \"quoted\"\n\t\\ é 🙂 \x01 \x7f \u2028",
    ["a", 1, None, [False], {"k": 2.0}], {"nested": {"list": [1, 2], "s": "x"}, "n": None},
    {1: "int key", "2": False}, {True: "bool key"},
]


@pytest.mark.parametrize("params", PARAMS, ids=repr)
def test_the_params_literal_evaluates_to_what_binding_them_gives(params: Any) -> None:
    text = policy_program.literal(params)
    assert text is not None
    written = eval_env().compile(f"cel.bind(params, {text}, params)", disable_check=True)
    bound = eval_env().compile("params", disable_check=True)
    got = written.eval(data={}).plain_value()
    assert tagged(got) == tagged(bound.eval(data={"params": params}).plain_value())
    assert tagged(got) == tagged(params)


@pytest.mark.parametrize("params", [
    datetime.date(2024, 1, 1), b"bytes", 2**63, -(2**63), float("inf"), float("nan"),
    {"ok": 1, "when": datetime.date(2024, 1, 1)}, [1, b"x"], "a\x00b",
])
def test_params_without_a_literal_have_none(params: Any) -> None:
    assert policy_program.literal(params) is None


def write(tmp_path: Path, spec: str) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(f"{HEAD}metadata: {{name: shape}}\nspec:\n  events: [CreateContainer]\n{spec}")
    return path


def requests() -> list[dict[str, Any]]:
    pod, ctr = BASE["pod"], BASE["container"]
    return [
        BASE,
        {**BASE, "pod": {**pod, "namespace": "kube-system"}},
        {**BASE, "pod": {**pod, "labels": {"tier": "gold"}}},
        {**BASE, "container": {**ctr, "name": "sidecar"}},
        {**BASE, "container": {**ctr, "env": ["LD_PRELOAD=/x.so"]}},
        {**BASE, "container": {k: v for k, v in ctr.items() if k in ("id", "name")}},
    ]


SHAPES = {
    # Conditions: a false one wins over another's error, in either order.
    "conditions": """\
  failurePolicy: Ignore
  matchConditions:
    - {name: tier, expression: "pod.labels['tier'] == 'gold'"}
    - {name: system, expression: "pod.namespace != 'kube-system'"}
  validations:
    - expression: "container.name != 'sidecar'"
""",
    "conditions-reversed": """\
  matchConditions:
    - {name: system, expression: "pod.namespace != 'kube-system'"}
    - {name: tier, expression: "pod.labels['tier'] == 'gold'"}
  validations:
    - expression: "container.name != 'sidecar'"
""",
    # Validations as one &&: a failing one, an erroring one, messages and their errors.
    "validations": """\
  failurePolicy: Ignore
  validations:
    - expression: "container.name != 'sidecar'"
      messageExpression: "'no ' + container.name"
    - expression: "!container.env.exists(e, e.startsWith('LD_PRELOAD='))"
      message: "no preload"
    - expression: "container.linux.resources.memory.limit > 0"
      messageExpression: "'limit ' + string(container.linux.resources.memory.limit)"
  validationActions: [Warn, Audit]
""",
    # No variables declared: `variables` is still an empty map.
    "no-variables": """\
  validations:
    - expression: "size(variables) == 0 && params.n == 3 && container.name != 'sidecar'"
  params: {n: 3}
""",
    "variables-and-audit": """\
  variables:
    - {name: name, expression: "container.name"}
    - {name: loud, expression: "variables.name.upperAscii()"}
  validations:
    - expression: "variables.name != 'sidecar'"
      messageExpression: "variables.loud + ' is a sidecar'"
  auditAnnotations:
    - {key: name, valueExpression: "variables.loud"}
""",
    "audit-only": """\
  auditAnnotations:
    - {key: ns, valueExpression: "pod.namespace + '/' + params.suffix"}
  params: {suffix: "it's"}
""",
    "mutations-only": """\
  matchConditions:
    - {name: system, expression: "pod.namespace != 'kube-system'"}
  mutations:
    - expression: "{'env': [{'key': 'NAME', 'value': container.name}]}"
""",
    # Params without a literal: no program, every request on the exact path.
    "dated-params": """\
  validations:
    - expression: "container.name != 'sidecar'"
  params: {since: 2024-01-01}
""",
}


@pytest.mark.parametrize("shape", SHAPES)
def test_each_program_shape_decides_and_counts_as_the_exact_path(tmp_path: Path,
                                                                 shape: str) -> None:
    policies = PolicySet(write(tmp_path, SHAPES[shape]))
    (compiled,) = policies.current
    assert (compiled.program is None) == (shape == "dated-params")
    exact = dataclasses.replace(compiled, program=None)
    view = policies.by_event[EVENT].view
    outcomes, answered = set(), 0
    for request in requests():
        want_tally, got_tally = Tally(), Tally()
        want = evaluate(exact, EVENT, request, want_tally)
        decoded = view.decode(json.dumps(request).encode())
        got = evaluate(compiled, EVENT, decoded, got_tally)
        assert got == want, request
        assert got_tally.counts() == want_tally.counts(), request
        outcomes.add(repr(want))
        if compiled.program is not None:
            answered += policy_program.run(compiled.program, decoded, compiled.plain) is not None
    assert len(outcomes) >= 2  # the requests do tell the outcomes apart
    assert answered >= (0 if compiled.program is None else 2)  # ... and reach the program


def test_the_program_says_only_what_the_caller_uses(tmp_path: Path) -> None:
    (compiled,) = PolicySet(write(tmp_path, SHAPES["conditions-reversed"])).current
    labelled = {**BASE, "pod": {**BASE["pod"], "labels": {"tier": "gold"}}}
    run = policy_program.run
    assert run(compiled.program, labelled, compiled.plain) is policy_program.ALL_HOLD
    system = {**labelled, "pod": {**labelled["pod"], "namespace": "kube-system"}}
    assert run(compiled.program, system, compiled.plain) is policy_program.DOES_NOT_APPLY
    sidecar = {**labelled, "container": {**BASE["container"], "name": "sidecar"}}
    assert run(compiled.program, sidecar, compiled.plain) == policy_program.ProgramResult(
        True, ([],))
    assert run(compiled.program, BASE, compiled.plain) is None  # no 'tier' label: an error
