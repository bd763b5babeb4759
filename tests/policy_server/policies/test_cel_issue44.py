"""Issue 44's CEL findings from the trial: a reason names its policy once, an audit annotation
may be null, one NodePolicy covers CreateContainer and a resize."""

from __future__ import annotations

from pathlib import Path

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
