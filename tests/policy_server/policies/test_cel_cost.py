"""The ``cel`` policy's cost limits: the static estimate at load, the iteration budget at run time.

A comprehension over a large list from the request is stopped at run time and follows
``failurePolicy``; nested comprehensions over request lists are refused at load (exit 2)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from policy_server import PolicyLoadError
from policy_server.policies.cel import cost
from policy_server.policies.cel.compiler import eval_env
from policy_server.policies.cel.policy_set import PolicySet
from policy_server.testing import PolicyRunner

REPO = Path(__file__).resolve().parents[3]
REQUEST = REPO / "schemas" / "webhook" / "examples" / "CreateContainer.request.json"
HEAD = "apiVersion: nri-webhook-bridge.io/v1alpha1\nkind: NodePolicy\n"
NESTED = "container.env.all(e, container.mounts.exists(m, m.destination != e))"


def policy(tmp_path: Path, spec: str) -> Path:
    path = tmp_path / "cost.yaml"
    path.write_text(f"{HEAD}metadata: {{name: cost}}\nspec:\n  events: [CreateContainer]\n{spec}")
    return path


@pytest.mark.parametrize(("source", "params", "expected"), [
    ("container.name == 'a'", {}, 0),
    ("container.env.all(e, e != '')", {}, cost.REQUEST_LIST_ITEMS),
    ("[1, 2, 3].exists(x, x == 2)", {}, 3),
    ("params.allowed.exists(a, container.name == a)", {"allowed": ["a", "b"]}, 2),
    ("container.env.all(e, params.allowed.exists(a, e == a))", {"allowed": ["a", "b"]},
     cost.REQUEST_LIST_ITEMS * 3),
    (NESTED, {}, cost.REQUEST_LIST_ITEMS * (1 + cost.REQUEST_LIST_ITEMS)),
    ("params.missing.all(x, x > 0)", {}, 0),
])
def test_the_estimate(source: str, params: dict[str, Any], expected: int) -> None:
    assert cost.estimate(eval_env().compile(source), params) == expected


@pytest.mark.processes
def test_nested_comprehensions_over_request_lists_are_refused_at_load(tmp_path: Path) -> None:
    path = policy(tmp_path, f'  validations:\n    - expression: "{NESTED}"\n')
    with pytest.raises(PolicyLoadError) as caught:
        PolicySet(path)
    message = str(caught.value)
    assert "NodePolicy cost" in message and "spec.validations[0].expression" in message
    assert "estimated cost 1,001,000 comprehension iterations exceeds the limit of 1,000,000" \
        in message
    done = subprocess.run([sys.executable, "-m", "policy_server.main", "--no-koordinator",
                           "--policy", f"cel={path}", "--check-policies"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done
    assert "estimated cost" in done.stderr


def test_a_params_list_counts_its_real_size(tmp_path: Path) -> None:
    small = policy(tmp_path, '  validations:\n    - expression: "params.n.all(a, params.n.all('
                   'b, a + b >= 0))"\n  params: {n: [1, 2, 3]}\n')
    assert PolicySet(small).current
    big = ", ".join(str(i) for i in range(1001))
    path = policy(tmp_path, '  validations:\n    - expression: "params.n.all(a, params.n.all('
                  f'b, a + b >= 0))"\n  params: {{n: [{big}]}}\n')
    with pytest.raises(PolicyLoadError, match="estimated cost 1,003,002 comprehension"):
        PolicySet(path)


@pytest.mark.parametrize("failure_policy", ["Fail", "Ignore"])
def test_a_comprehension_over_a_large_request_list_is_stopped_at_run_time(
    tmp_path: Path, failure_policy: str
) -> None:
    path = policy(tmp_path, f"  failurePolicy: {failure_policy}\n  validations:\n"
                  "    - expression: \"container.env.all(e, !e.startsWith('LD_PRELOAD='))\"\n")
    body = json.loads(REQUEST.read_text())
    runner = PolicyRunner.builtin("cel", path)
    assert runner.send(body).json == {}  # three variables: well within the budget
    body["container"]["env"] = [f"V{i}=x" for i in range(cost.RUNTIME_ITERATION_BUDGET + 1)]
    reply = runner.send(body).json
    if failure_policy == "Fail":
        assert "Iteration budget exceeded" in reply["reject"]["reason"]
    else:
        assert "reject" not in reply
        assert any("ignored (failurePolicy: Ignore)" in w and "Iteration budget exceeded" in w
                   for w in reply["warnings"])
