"""Issue 44's CEL findings from the trial: a reason names its policy once, an audit annotation
may be null, one NodePolicy covers CreateContainer and a resize, a mutation from params is
checked at load, and the load check for one field (the contract's range walk)."""

from __future__ import annotations

from pathlib import Path

import pytest

from policy_server import EventName, PolicyLoadError
from policy_server.policies.cel import mutation_check
from tests.policy_server.policies.test_cel import policy, request, runner

DENY = """\
apiVersion: nri-webhook-bridge.io/v1alpha1
kind: NodePolicy
metadata: {name: batch-memory-cap}
spec:
  events: [CreateContainer]
  validations: [{expression: "false", message: "too much memory"}]
"""


def test_a_reject_reason_names_its_policy_once_beside_another(tmp_path: Path) -> None:
    path = policy(tmp_path, "other", """\
  events: [CreateContainer]
  auditAnnotations: [{key: k, valueExpression: "'v'"}]
""")
    path.write_text(path.read_text() + "---\n" + DENY)
    reply = runner(path).send(request("CreateContainer")).json
    assert reply["reject"]["reason"] == "node-policies: batch-memory-cap: too much memory"


def test_an_audit_annotation_may_be_null(tmp_path: Path) -> None:
    path = policy(tmp_path, "a", """\
  events: [CreateContainer]
  auditAnnotations:
    - {key: big, valueExpression: "container.name == 'app' ? 'named app' : null"}
    - {key: none, valueExpression: "container.name == 'x' ? 'named x' : null"}
""")
    assert runner(path).send(request("CreateContainer")).json == {
        "warnings": ["a/big: named app"]}


def test_one_policy_covers_create_and_a_resize(tmp_path: Path) -> None:
    path = policy(tmp_path, "cap", """\
  events: [CreateContainer, UpdateContainer]
  variables:
    - name: limit
      expression: >-
        event == 'UpdateContainer' ? linux_resources.?memory.?limit.orValue(0)
        : container.?linux.?resources.?memory.?limit.orValue(0)
  validations: [{expression: "variables.limit <= 1", message: "over"}]
""")
    run = runner(path)
    for event in ("CreateContainer", "UpdateContainer"):
        assert run.send(request(event)).json == {"reject": {"reason": "node-policies: cap: over"}}


def test_a_mutation_from_params_is_checked_at_load(tmp_path: Path) -> None:
    text = """\
  events: [CreateContainer]
  params: {{shares: {shares}}}
  mutations:
    - expression: "{{'linux': {{'resources': {{'cpu': {{'shares': params.shares}}}}}}}}"
"""
    with pytest.raises(PolicyLoadError, match=r"\(CreateContainer\): ResourcePatch.cpu_shares: "
                       "-5 is below the minimum"):
        runner(policy(tmp_path, "p", text.format(shares=-5)))
    reply = runner(policy(tmp_path, "p", text.format(shares=512))).send(
        request("CreateContainer")).json
    assert reply == {"adjust": {"linux": {"resources": {"cpu": {"shares": 512}}}}}


@pytest.mark.parametrize(("event", "pointer", "value", "refused"), [
    (EventName.CREATE_CONTAINER, "/linux/resources/cpu/shares", -1,
     "ResourcePatch.cpu_shares: -1 is below the minimum"),
    (EventName.CREATE_CONTAINER, "/linux/resources/cpu/shares", 2, None),
    (EventName.UPDATE_CONTAINER, "/linux/resources/cpu/shares", -1,
     "ResourcePatch.cpu_shares: -1 is below the minimum"),
    (EventName.CREATE_CONTAINER, "/env/-", {"key": "A", "value": "b"}, None),
    (EventName.UPDATE_CONTAINER, "/env/-", {"key": "A", "value": "b"},
     "env is no field UpdateContainer may change here (known: linux)"),
    (EventName.CREATE_CONTAINER, "/image", "x", "image is no field CreateContainer may change"),
])
def test_the_load_check_for_one_field(event: EventName, pointer: str, value: object,
                                      refused: str | None) -> None:
    # The helper a walk over the contract's ranges calls for CEL's leg.
    found = mutation_check.refusal(event, pointer, value)
    assert found == refused if refused is None else refused in (found or "")
