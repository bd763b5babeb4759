"""The ``cel`` policy's counters per NodePolicy and validation, scraped from a real server.

A real uvicorn on a Unix socket serves four NodePolicies (Deny, Warn + Audit, an error under
Fail and under Ignore); requests go through the webhook route and ``/metrics`` is read back."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from policy_server.assemble import assemble
from policy_server.service import ServerOptions
from tests.policy_server.servers import serve_on_uds

REPO = Path(__file__).resolve().parents[3]
REQUEST = REPO / "schemas" / "webhook" / "examples" / "CreateContainer.request.json"
POLICIES = """\
apiVersion: nri-webhook-bridge.io/v1alpha1
kind: NodePolicy
metadata: {name: limits}
spec:
  events: [CreateContainer]
  validations:
    - expression: "container.name != 'bad'"
    - expression: "container.name != 'worse'"
---
apiVersion: nri-webhook-bridge.io/v1alpha1
kind: NodePolicy
metadata: {name: advice}
spec:
  events: [CreateContainer]
  validationActions: [Warn, Audit]
  validations:
    - expression: "container.name == 'app'"
---
apiVersion: nri-webhook-bridge.io/v1alpha1
kind: NodePolicy
metadata: {name: strict-error}
spec:
  events: [CreateContainer]
  matchConditions:
    - {name: only-bad, expression: "container.name == 'bad'"}
  validations:
    - expression: "pod.labels['missing'] == 'x'"
---
apiVersion: nri-webhook-bridge.io/v1alpha1
kind: NodePolicy
metadata: {name: lenient-error}
spec:
  events: [CreateContainer]
  failurePolicy: Ignore
  validations:
    - expression: "pod.annotations['missing'] == 'x'"
"""


def _request(name: str) -> dict[str, Any]:
    body: dict[str, Any] = copy.deepcopy(json.loads(REQUEST.read_text()))
    body["container"]["name"] = name
    return body


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples
            if s.name.startswith("policy_cel_")}


async def test_counters_per_node_policy_and_validation_on_metrics(tmp_path: Path) -> None:
    file = tmp_path / "policies.yaml"
    file.write_text(POLICIES)
    assembly = assemble(ServerOptions(default_policies=False, builtin_policies=(("cel", file),)))
    async with serve_on_uds(assembly.app, tmp_path / "p.sock") as sock:
        transport = httpx.AsyncHTTPTransport(uds=str(sock))
        async with httpx.AsyncClient(transport=transport, base_url="http://policy") as client:
            replies = [(await client.post("/v1/policies/cel", json=_request(n))).json()
                       for n in ("app", "bad", "other")]
            metrics = (await client.get("/metrics")).text
    assert "limits: failed expression: container.name != 'bad'" in replies[1]["reject"]["reason"]
    assert "strict-error" in replies[1]["reject"]["reason"]
    got = _samples(metrics)

    def value(name: str, **labels: str) -> float:
        return got.get((name, tuple(sorted(labels.items()))), 0.0)

    assert value("policy_cel_evaluations_total", node_policy="limits") == 3
    assert value("policy_cel_evaluations_total", node_policy="strict-error") == 1
    assert value("policy_cel_validation_failures_total", node_policy="limits",
                 validation="validations[0]", action="Deny") == 1
    assert value("policy_cel_validation_failures_total", node_policy="limits",
                 validation="validations[1]", action="Deny") == 0
    for action in ("Warn", "Audit"):  # "bad" and "other" are not "app"
        assert value("policy_cel_validation_failures_total", node_policy="advice",
                     validation="validations[0]", action=action) == 2
    assert value("policy_cel_errors_total", node_policy="strict-error", outcome="rejected") == 1
    assert value("policy_cel_errors_total", node_policy="lenient-error", outcome="ignored") == 3
    # Every label value comes from the file, none from a request.
    labels = {v for (_, pairs) in got for _, v in pairs}
    assert labels <= {"limits", "advice", "strict-error", "lenient-error", "validations[0]",
                      "validations[1]", "Deny", "Warn", "Audit", "rejected", "ignored"}
