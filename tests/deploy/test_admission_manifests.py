"""deploy/kubernetes/admission as kubectl kustomize renders it: valid for Kubernetes 1.35,
the objects tests/security/test_admission_policy.py evaluates, and the params an operator's
overlay merges in (the one in docs/security.md too)."""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy import support as s
from tests.deploy.admission_fixtures import (
    ADMISSION,
    KOORD_SCHEDULER,
    NAMESPACE,
    PARAMS,
    POLICY,
    RESOURCE_STATUS,
    TOLERATE,
    allowed,
    create,
    params_of,
    pod,
    policy_of,
    refused,
    sources,
)

pytestmark = pytest.mark.processes  # starts processes: not in make check

KUBERNETES = "1.35"  # the release the manifests are checked against
LABELS = {"app.kubernetes.io/part-of": "nri-webhook-bridge"}


def rendered() -> list[dict[str, Any]]:
    return s.render(ADMISSION)


def _without_labels(doc: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    labels = doc["metadata"].pop("labels", {})
    for key, value in LABELS.items():
        assert labels.pop(key) == value, f"{doc['kind']}: kustomize's label missing"
    if labels:
        doc["metadata"]["labels"] = labels
    return doc


def test_the_rendering_is_what_the_files_say() -> None:
    def key(d: dict[str, Any]) -> str:
        return str(d["kind"])

    got = sorted(map(_without_labels, rendered()), key=key)
    assert got == sorted(sources(), key=key)


def test_renders_a_policy_its_bindings_and_params() -> None:
    docs = rendered()
    assert sorted(d["kind"] for d in docs) == [
        "ConfigMap", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
        "ValidatingAdmissionPolicyBinding"]
    vap = s.one(docs, "ValidatingAdmissionPolicy")
    cm = s.one(docs, "ConfigMap")
    bindings = {d["metadata"]["name"]: d for d in docs
                if d["kind"] == "ValidatingAdmissionPolicyBinding"}
    assert set(bindings) == {POLICY, POLICY + "-status"}
    # Cluster-scoped objects carry no namespace (kustomize must not add one).
    for doc in (vap, *bindings.values()):
        assert doc["apiVersion"] == "admissionregistration.k8s.io/v1"
        assert "namespace" not in doc["metadata"]
    assert vap["metadata"]["name"] == POLICY
    assert vap["spec"]["failurePolicy"] == "Fail"
    assert vap["spec"]["paramKind"] == {"apiVersion": "v1", "kind": "ConfigMap"}
    not_found = {}
    for name, binding in bindings.items():
        spec = binding["spec"]
        assert spec["policyName"] == POLICY and spec["validationActions"] == ["Deny"]
        ref = spec["paramRef"]
        assert (ref["name"], ref["namespace"]) == (PARAMS, NAMESPACE)
        not_found[name] = ref["parameterNotFoundAction"]
    # Pods fail closed; kubelet's status writes never wait for the ConfigMap.
    assert not_found == {POLICY: "Deny", POLICY + "-status": "Allow"}
    # Between them, the bindings cover exactly what the policy matches.
    policy_rules = sorted((r["operations"], r["resources"])
                          for r in vap["spec"]["matchConstraints"]["resourceRules"])
    bound = sorted((r["operations"], r["resources"]) for b in bindings.values()
                   for r in b["spec"]["matchResources"]["resourceRules"])
    assert bound == policy_rules
    assert (cm["metadata"]["name"], cm["metadata"]["namespace"]) == (PARAMS, NAMESPACE)
    assert set(cm["data"]) == {"serviceAccounts", "namespaces", "trustedKeys"}


def test_rendered_objects_match_the_kubernetes_1_35_schema() -> None:
    docs = rendered()
    errors = [e for e in (s.schema_errors(d, KUBERNETES) for d in docs) if e is not None]
    assert not errors, "\n".join(errors)


def test_schema_check_catches_a_misspelt_admission_field() -> None:
    binding = s.one(rendered(), "ValidatingAdmissionPolicyBinding", POLICY)
    binding["spec"]["validationAction"] = binding["spec"].pop("validationActions")
    error = s.schema_errors(binding, KUBERNETES)
    assert error is not None and "validationAction" in error
    vap = s.one(rendered(), "ValidatingAdmissionPolicy")
    vap["spec"]["matchConstraints"]["resourceRules"][0]["operation"] = ["CREATE"]
    error = s.schema_errors(vap, KUBERNETES)
    assert error is not None and "operation" in error


def test_the_bridge_namespace_exists_in_the_deployment_for_the_params() -> None:
    ns = s.one(s.render(s.BASE), "Namespace")
    assert ns["metadata"]["name"] == NAMESPACE


def test_the_bridges_own_pod_is_allowed_in_its_namespace_only() -> None:
    policy = policy_of(rendered())
    ds = s.one(s.render(s.BASE), "DaemonSet")
    template = copy.deepcopy(ds["spec"]["template"])
    assert TOLERATE in template["metadata"]["annotations"], "the DaemonSet opts out"
    template["metadata"]["name"] = "nri-webhook-bridge-x7k2p"
    template["metadata"]["namespace"] = NAMESPACE
    controller = "system:serviceaccount:kube-system:daemon-set-controller"
    assert not allowed(policy, create(template, user=controller)).matched
    template["metadata"]["namespace"] = "team-a"
    refused(policy, create(template, user=controller), f"annotation {TOLERATE}")


def test_an_overlay_sets_the_service_accounts(tmp_path: Path) -> None:
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(ADMISSION, overlay)],
        "configMapGenerator": [{
            "name": PARAMS, "namespace": NAMESPACE, "behavior": "merge",
            "literals": ["serviceAccounts=platform/my-scheduler"],
        }],
    }), encoding="utf-8")
    docs = s.render(overlay)
    assert params_of(docs)["serviceAccounts"] == "platform/my-scheduler"
    assert params_of(docs)["namespaces"] == params_of(rendered())["namespaces"]
    mine = policy_of(docs)
    forged = pod(annotations={RESOURCE_STATUS: '{"cpuset":"2-3"}'})
    allowed(mine, create(forged, user="system:serviceaccount:platform:my-scheduler"))
    refused(mine, create(forged, user=KOORD_SCHEDULER), KOORD_SCHEDULER)


def test_the_overlay_in_the_docs_renders_and_trusts_what_it_says(tmp_path: Path) -> None:
    text = (s.REPO / "docs" / "security.md").read_text(encoding="utf-8")
    section = text.split("## The admission policy", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```yaml\n(.*?)```", section, re.DOTALL)
    assert len(blocks) == 1, "one overlay example"
    doc = yaml.safe_load(blocks[0])
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    doc["resources"] = [os.path.relpath(ADMISSION, overlay)]
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    docs = s.render(overlay)
    mine = policy_of(docs)
    forged = pod(annotations={RESOURCE_STATUS: '{"cpuset":"2-3"}'})
    for user in (KOORD_SCHEDULER, "system:serviceaccount:platform:sched"):
        allowed(mine, create(forged, user=user))
    allowed(mine, create(pod(annotations={TOLERATE: "true"}, namespace="batch-jobs")))
    refused(mine, create(forged))
