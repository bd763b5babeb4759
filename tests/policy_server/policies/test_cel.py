"""The built-in ``cel`` policy: load-time checks, each action, failurePolicy, reload, bad input.

Requests are the contract's examples (schemas/webhook/examples/) sent through the test kit, as
the server would answer them; the launcher is run for the exit status of a bad policy."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from policy_server import PolicyLoadError, ReloadResult
from policy_server.policies.cel.policy_set import PolicySet
from policy_server.testing import PolicyRunner

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "schemas" / "webhook" / "examples"
HEAD = "apiVersion: nri-webhook-bridge.io/v1alpha1\nkind: NodePolicy\n"


def request(event: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((EXAMPLES / f"{event}.request.json").read_text())
    return body


def policy(tmp_path: Path, name: str, spec: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"{HEAD}metadata: {{name: {name}}}\nspec:\n{spec}")
    return path


def runner(path: Path) -> PolicyRunner:
    return PolicyRunner.builtin("cel", path)


def load_error(path: Path) -> str:
    with pytest.raises(PolicyLoadError) as caught:
        PolicySet(path)
    return str(caught.value)


MEMORY = """\
  events: [CreateContainer]
  validations:
    - expression: "container.linux.resources.memory.limit <= params.max"
      messageExpression: "'limit ' + string(container.linux.resources.memory.limit)"
  params: {max: 100}
"""


def test_a_misspelt_field_fails_to_load_naming_policy_expression_and_field(tmp_path: Path) -> None:
    path = policy(tmp_path, "typo", MEMORY.replace("linux.resources.memory.limit <=",
                                                   "linux.resource.memory.limit <="))
    error = load_error(path)
    assert "NodePolicy typo" in error
    assert "spec.validations[0].expression" in error
    assert "container.linux.resource.memory.limit <= params.max" in error
    assert "undefined field 'resource'" in error


@pytest.mark.processes
def test_the_server_exits_2_on_a_misspelt_field(tmp_path: Path) -> None:
    path = policy(tmp_path, "typo", MEMORY.replace("memory.limit <=", "memory.limt <="))
    done = subprocess.run([sys.executable, "-m", "policy_server.main", "--no-koordinator",
                           "--policy", f"cel={path}", "--check-policies"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done
    assert "undefined field 'limt'" in done.stderr


@pytest.mark.parametrize(("spec", "expected"), [
    ("  events: [CreateContainer]\n  validations:\n    - expression: \"container.name\"\n",
     "must be bool, is string"),
    ("  events: [CreateContainer]\n  validations:\n    - expression: \"variables.x\"\n",
     "variables.x is not declared"),
    ("  events: [RemoveContainer]\n  mutations:\n    - expression: \"{}\"\n",
     "only CreateContainer and UpdateContainer"),
    ("  events: [CreateContainer]\n  validations:\n    - expression: \"adjust.env.size() > 0\"\n",
     "undeclared reference to 'adjust.env'"),
    ("  events: [CreateContainer]\n", "it does nothing"),
])
def test_expressions_are_checked_at_load(tmp_path: Path, spec: str, expected: str) -> None:
    assert expected in load_error(policy(tmp_path, "p", spec))


@pytest.mark.parametrize(("text", "expected"), [
    ("apiVersion: [", "not valid YAML at line 1"),
    (f"{HEAD}metadata: {{name: p}}\nspec: {{events: [CreateContainer], valdations: []}}\n",
     "NodePolicy p: spec.valdations: unknown key"),
    (f"{HEAD}metadata: {{name: p}}\nspec: {{events: [Create]}}\n", "spec.events[0]"),
    (f"{HEAD}metadata: {{name: p}}\nspec:\n  events: [CreateContainer]\n"
     "  validationActions: [Reject]\n  validations: [{expression: 'true'}]\n",
     "spec.validationActions[0]"),
    ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {}\n", "apiVersion"),
])
def test_bad_documents_get_specific_errors(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    assert expected in load_error(path)


def test_deny_warn_audit(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    deny = runner(policy(tmp_path, "deny", MEMORY.replace("max: 100", "max: 1")))
    assert deny.send(request("CreateContainer")).json == {
        "reject": {"reason": "node-policies: deny: limit 67108864"}}
    warn = runner(policy(tmp_path, "warn", MEMORY.replace("max: 100", "max: 1")
                         + "  validationActions: [Warn]\n"))
    assert warn.send(request("CreateContainer")).json == {"warnings": ["warn: limit 67108864"]}
    audit = runner(policy(tmp_path, "audit", MEMORY.replace("max: 100", "max: 1")
                          + "  validationActions: [Audit]\n"))
    with caplog.at_level("INFO"):
        assert audit.send(request("CreateContainer")).json == {}
    assert "cel policy audit failed validation (audit): limit 67108864" in caplog.text
    passes = runner(policy(tmp_path, "passes", MEMORY.replace("max: 100", "max: 1000000000")))
    assert passes.send(request("CreateContainer")).json == {}


def test_audit_annotations_become_warnings(tmp_path: Path) -> None:
    path = policy(tmp_path, "notes", """\
  events: [CreateContainer]
  auditAnnotations:
    - {key: image, valueExpression: "container.annotations['io.kubernetes.cri.image-name']"}
""")
    assert runner(path).send(request("CreateContainer")).json == {
        "warnings": ["notes/image: localhost/demo/busybox:1.0"]}


def test_match_conditions_and_lazy_variables(tmp_path: Path) -> None:
    # The variable would fail (no such key); it is never computed when nothing reads it.
    path = policy(tmp_path, "lazy", """\
  events: [CreateContainer]
  matchConditions: [{name: app-only, expression: "container.name == 'app'"}]
  variables: [{name: missing, expression: "pod.labels['not-there']"}]
  validations:
    - expression: "pod.namespace == 'default' || variables.missing == 'x'"
      message: "wrong namespace"
""")
    run = runner(path)
    assert run.send(request("CreateContainer")).json == {}
    other = request("CreateContainer")
    other["pod"]["namespace"] = "prod"
    assert "Key not found" in run.send(other).json["reject"]["reason"]
    other["container"]["name"] = "sidecar"  # the match condition is false: not evaluated
    assert run.send(other).json == {}


@pytest.mark.parametrize(("failure_policy", "expected"), [
    ("Fail", "reject"),
    ("Ignore", "warnings"),
])
def test_an_expression_error_follows_failure_policy(tmp_path: Path, failure_policy: str,
                                                    expected: str) -> None:
    path = policy(tmp_path, "p", f"""\
  events: [CreateContainer]
  failurePolicy: {failure_policy}
  validations: [{{expression: "pod.labels['not-there'] == 'x'"}}]
""")
    reply = runner(path).send(request("CreateContainer")).json
    assert list(reply) == [expected]
    assert "Key not found in map" in json.dumps(reply)


def test_mutations_apply_configuration_json_patch_and_removal(tmp_path: Path) -> None:
    path = policy(tmp_path, "m", """\
  events: [CreateContainer]
  mutations:
    - expression: >-
        {'env': [{'key': 'A', 'value': container.name}], 'remove': {'env': ['HOSTNAME']}}
    - patchType: JSONPatch
      expression: "[{'op': 'add', 'path': '/linux/resources/cpu/shares', 'value': 7}]"
""")
    run = runner(path)
    assert run.send(request("CreateContainer")).json == {"adjust": {
        "env": [{"key": "A", "value": "app"}],
        "linux": {"resources": {"cpu": {"shares": 7}}},
        "remove": {"env": ["HOSTNAME"]}}}


def test_update_container_mutation_is_the_containers_update(tmp_path: Path) -> None:
    path = policy(tmp_path, "u", """\
  events: [UpdateContainer]
  mutations:
    - expression: "{'linux': {'resources': {'cpu': {'shares': 3}}}}"
""")
    req = request("UpdateContainer")
    reply = runner(path).send(req).json
    assert reply == {"update": [{"container_id": req["container"]["id"],
                                 "linux": {"resources": {"cpu": {"shares": 3}}}}]}


@pytest.mark.parametrize(("event", "mutation", "field"), [
    ("CreateContainer", "{'env': [{'key': 'A', 'value': 1}]}",
     "Adjustment.env['A']: must be a string, got int (reply contract: adjust/env/[]/value)"),
    ("CreateContainer", "{'env': [{'name': 'A', 'value': 'x'}]}",
     "env[0].name: is no field CreateContainer may change here"),
    ("CreateContainer", "{'env': {'A': 'x'}}", "adjust/env: must be a list, got dict"),
    ("CreateContainer", "{'env': ['A=x']}", "adjust/env/[]: must be an object, got str"),
    ("CreateContainer", "{'args': 'ls'}", "adjust/args: must be a list, got str"),
    ("CreateContainer", "{'remove': {'env': ['A', 2]}}", "Adjustment.remove_env[1]"),
    ("CreateContainer", "{'linux': {'sysctl': {'net.x': 1}}}",
     "Adjustment.sysctl['net.x']: must be a string"),
    ("CreateContainer", "{'linux': {'resources': {'cpu': {'shares': 'many'}}}}",
     "ResourcePatch.cpu_shares: must be an integer, got str"),
    ("CreateContainer", "{'linux': {'resources': {'cpu': {'sharez': 3}}}}",
     "linux.resources.cpu.sharez: is no field CreateContainer may change here"),
    ("CreateContainer", "{'linux': {'namespaces': 'host'}}",  # untyped: Adjustment.extra
     "Adjustment.extra is outside the contract"),
    ("UpdateContainer", "{'linux': {'resources': {'cpu': 2}}}",
     "update/[]/linux/resources/cpu: must be an object, got int"),
    ("UpdateContainer", "{'linux': {'resources': {'cpu': {'shares': -1}}}}",
     "ResourcePatch.cpu_shares: -1 is below the minimum"),
    ("UpdateContainer", "{'linux': {'resources': {'unified': {'memory.high': 5}}}}",
     "ResourcePatch.unified['memory.high']: must be a string"),
])
@pytest.mark.parametrize("failure", ["Fail", "Ignore"])
def test_a_mutation_outside_the_contract_follows_the_failure_policy(
        tmp_path: Path, event: str, mutation: str, field: str, failure: str) -> None:
    # Never a 200 reply the bridge would refuse: the policy's failurePolicy decides, with an
    # error naming the field. dyn(...): computed, so known only at run time (a constant is a
    # load error: the test below).
    path = policy(tmp_path, "bad", f"""\
  events: [{event}]
  failurePolicy: {failure}
  mutations:
    - expression: "dyn({mutation})"
""")
    reply = runner(path).send(request(event)).json
    said = (reply.get("reject") or {}).get("reason", "") + "".join(reply.get("warnings", ()))
    assert field in said
    if failure == "Fail":
        assert list(reply) == ["reject"]
    else:
        assert list(reply) == ["warnings"]


@pytest.mark.parametrize(("event", "mutation", "field"), [
    ("CreateContainer", "{'image': 'x', 'name': 'y', 'env': [{'key': 'A', 'value': 'b'}]}",
     "image, name: are no fields CreateContainer may change here (known: CDI_devices, "),
    ("CreateContainer", "{'name': container.name, 'image': 'x'}", "image, name: are no fields"),
    ("CreateContainer", "{'linux': {'resources': {'cpu': {'shares': -5}}}}",
     "ResourcePatch.cpu_shares: -5 is below the minimum"),
    ("CreateContainer", "{'env': [{'key': 'A', 'value': container.name}], 'linux': "
     "{'resources': {'cpu': {'shares': -5, 'quota': container.linux.resources.cpu.quota}}}}",
     "ResourcePatch.cpu_shares: -5 is below the minimum"),
    ("CreateContainer", "{'env': [{'key': 'A', 'value': 1}]}",
     "Adjustment.env['A']: must be a string, got int"),
    ("UpdateContainer", "{'env': [{'key': 'A', 'value': container.name}]}",
     "env: is no field UpdateContainer may change here (known: linux)"),
    ("UpdateContainer", "{'linux': {'resources': {'cpu': {'shares': -1}}}}",
     "ResourcePatch.cpu_shares: -1 is below the minimum"),
])
def test_a_constant_mutation_outside_the_contract_fails_to_load(
        tmp_path: Path, event: str, mutation: str, field: str) -> None:
    path = policy(tmp_path, "bad", f"""\
  events: [{event}]
  mutations:
    - expression: "{mutation}"
""")
    with pytest.raises(PolicyLoadError) as caught:
        runner(path)
    assert f"NodePolicy bad ({path}): spec.mutations[0].expression: " in str(caught.value)
    assert f"({event}): {field}" in str(caught.value)


@pytest.mark.parametrize(("patch", "field"), [
    ("[{'op': 'add', 'path': '/image', 'value': 'x'}]",
     "JSON Patch path /image: image is no field CreateContainer may change here"),
    ("[{'op': 'replace', 'path': '/linux/resources/cpu/shares', 'value': -5}]",
     "ResourcePatch.cpu_shares: -5 is below the minimum"),
    ("[{'op': 'add', 'path': '/env/-', 'value': {'key': 'A', 'value': 5}}]",
     "Adjustment.env['A']: must be a string, got int"),
])
def test_a_constant_json_patch_outside_the_contract_fails_to_load(
        tmp_path: Path, patch: str, field: str) -> None:
    path = policy(tmp_path, "bad", f"""\
  events: [CreateContainer]
  mutations:
    - patchType: JSONPatch
      expression: "{patch}"
""")
    with pytest.raises(PolicyLoadError, match=re.escape(f"(CreateContainer): {field}")):
        runner(path)


def test_the_same_mutations_inside_the_contract_load(tmp_path: Path) -> None:
    path = policy(tmp_path, "ok", """\
  events: [CreateContainer]
  mutations:
    - expression: "{'linux': {'resources': {'cpu': {'shares': 5}}}, 'annotations': {'b': 'x'}}"
    - patchType: JSONPatch
      expression: "[{'op': 'add', 'path': '/annotations/a', 'value': 'y'}]"
""")
    adjust = runner(path).send(request("CreateContainer")).json["adjust"]
    assert adjust["linux"] == {"resources": {"cpu": {"shares": 5}}}
    assert list(adjust["annotations"]) == ["a", "b"]  # sorted, whatever cel-cpp's map order


def test_unknown_keys_at_run_time_are_named_sorted_every_time(tmp_path: Path) -> None:
    path = policy(tmp_path, "bad", """\
  events: [CreateContainer]
  mutations:
    - expression: "dyn({'zeta': 1, 'image': 'x', 'name': 'y', 'alpha': 2})"
""")
    run = runner(path)
    reasons = {run.send(request("CreateContainer")).json["reject"]["reason"] for _ in range(6)}
    assert reasons == {"node-policies: bad: alpha, image, name, zeta: are no "
                       "fields CreateContainer may change here (known: CDI_devices, "
                       "annotations, args, env, hooks, linux, mounts, remove, rlimits)"}


def test_validate_container_adjustment_sees_adjust_owners_plugins(tmp_path: Path) -> None:
    path = policy(tmp_path, "v", """\
  events: [ValidateContainerAdjustment]
  validations:
    - expression: >-
        !has(adjust.linux.resources.cpu.shares) || adjust.linux.resources.cpu.shares < 100
      messageExpression: "'shares ' + string(adjust.linux.resources.cpu.shares) + ' by ' +
        owners.owners[container.id].simple['16'] + ' of ' + string(plugins.size())"
""")
    assert runner(path).send(request("ValidateContainerAdjustment")).json == {
        "reject": {"reason": "node-policies: v: shares 512 by 10-webhook-bridge of 1"}}


def test_the_iteration_budget_bounds_an_expression(tmp_path: Path) -> None:
    numbers = ", ".join(str(i) for i in range(200))
    path = policy(tmp_path, "cost", f"""\
  events: [CreateContainer]
  validations:
    - expression: "params.n.all(a, params.n.all(b, a + b >= 0))"
  params: {{n: [{numbers}]}}
""")
    reason = runner(path).send(request("CreateContainer")).json["reject"]["reason"]
    assert "Iteration budget exceeded" in reason


def test_a_bad_reload_is_refused_and_the_last_good_set_stays(tmp_path: Path) -> None:
    path = policy(tmp_path, "p", MEMORY)
    params = tmp_path / "params.yaml"
    params.write_text("max: 1\n")
    policies = PolicySet(path)
    assert policies.poll() is ReloadResult.UNCHANGED
    good = policies.current
    path.write_text(path.read_text().replace("memory.limit <=", "memory.limt <="))
    assert policies.poll() is ReloadResult.INVALID
    assert policies.current is good
    assert "undefined field 'limt'" in (policies.status().last_error or "")
    path.write_text(path.read_text().replace("memory.limt <=", "memory.limit <=").replace(
        "  params: {max: 100}\n", "  paramsFile: params.yaml\n"))
    assert policies.poll() is ReloadResult.APPLIED
    assert policies.current[0].params == {"max": 1}
    assert policies.status().generation == 2 and policies.status().last_error is None
    params.write_text("max: 2\n")
    assert policies.poll() is ReloadResult.APPLIED  # a paramsFile is watched too
    assert policies.current[0].params == {"max": 2}


def test_a_directory_and_several_documents_merge_by_key(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(f"""{HEAD}metadata: {{name: a}}
spec:
  events: [CreateContainer]
  mutations: [{{expression: "{{'env': [{{'key': 'X', 'value': 'a'}}]}}"}}]
---
{HEAD}metadata: {{name: b}}
spec:
  events: [CreateContainer]
  mutations: [{{expression: "{{'env': [{{'key': 'X', 'value': 'b'}}]}}"}}]
""")
    reply = runner(tmp_path).send(request("CreateContainer")).json
    assert reply["adjust"] == {"env": [{"key": "X", "value": "b"}]}
    assert any("conflict on" in w for w in reply["warnings"])


def test_the_same_name_twice_is_refused(tmp_path: Path) -> None:
    doc = f"{HEAD}metadata: {{name: a}}\nspec: {{events: [CreateContainer], " \
          "validations: [{expression: 'true'}]}\n"
    path = tmp_path / "twice.yaml"
    path.write_text(doc + "---\n" + doc)
    assert "NodePolicy a is defined twice" in load_error(path)


def test_every_example_request_is_answered(tmp_path: Path) -> None:
    events = sorted(p.name.split(".")[0] for p in EXAMPLES.glob("*.request.json"))
    path = policy(tmp_path, "all", f"""\
  events: [{", ".join(events)}]
  auditAnnotations: [{{key: event, valueExpression: "event"}}]
""")
    run = runner(path)
    for event in events:
        reply = run.send(copy.deepcopy(request(event))).json
        assert reply.get("warnings", [f"all/event: {event}"]) == [f"all/event: {event}"], event


def test_variables_read_earlier_variables(tmp_path: Path) -> None:
    path = policy(tmp_path, "chain", """\
  events: [CreateContainer]
  variables:
    - {name: a, expression: "container.name"}
    - {name: b, expression: "variables.a + '-b'"}
    - {name: c, expression: "variables.b + '-c' + variables.a"}
  validations:
    - {expression: "variables.c == 'x'", messageExpression: "variables.c + variables.b"}
""")
    assert runner(path).send(request("CreateContainer")).json == {
        "reject": {"reason": "node-policies: chain: app-b-cappapp-b"}}


def test_a_false_match_condition_wins_over_another_ones_error(tmp_path: Path) -> None:
    # As the API server: any false -> the policy does not apply; an error counts only when
    # none is false.
    spec = """\
  events: [CreateContainer]
  matchConditions:
    - {name: broken, expression: "pod.labels['missing'] == 'x'"}
    - {name: NAME, expression: "pod.namespace == 'NS'"}
  validations:
    - expression: "false"
"""
    skipped = policy(tmp_path, "skipped", spec.replace("NAME", "other").replace("NS", "other"))
    assert runner(skipped).send(request("CreateContainer")).json == {}
    applies = policy(tmp_path, "applies", spec.replace("NAME", "same").replace("NS", "default"))
    reason = runner(applies).send(request("CreateContainer")).json["reject"]["reason"]
    assert "spec.matchConditions[0].expression" in reason and "missing" in reason
