"""The admission policy's files and cases, shared by its tests.

Owns: reading deploy/kubernetes/admission as written (``sources``: the kustomization's resources
and its params ConfigMap built from the generator's literals, as kustomize builds it;
tests/deploy/test_admission_manifests.py checks that the rendering agrees), the keys the code
declares the policy must guard (``guarded_keys``, from policy_server/policies/trusted_keys.py,
and ``is_guarded`` for one key),
builders of pods and AdmissionReview requests, and ``allowed``/``refused``, which assert a
verdict and name it when it is the other one.

Must not: start processes or touch the network.
"""

from __future__ import annotations

import tomllib
from typing import Any

from policy_server.policies import trusted_keys
from policy_server.policies.koordinator_qos import keys
from tests.deploy import admission_review as ar
from tests.deploy import support as s

ADMISSION = s.KUSTOMIZE / "admission"
POLICY = "nri-webhook-bridge-trusted-pod-keys"
PARAMS = "nri-webhook-bridge-admission"
NAMESPACE = "nri-webhook-bridge"

KOORD_SCHEDULER = "system:serviceaccount:koordinator-system:koord-scheduler"
KOORD_MANAGER = "system:serviceaccount:koordinator-system:koord-manager"
AUTHOR = "alice@example.com"
REPLICASET = "system:serviceaccount:kube-system:replicaset-controller"
KUBELET = "system:node:node-1"

RESOURCE_STATUS = keys.ANNOTATION_RESOURCE_STATUS
QOS_CLASS = keys.LABEL_QOS_CLASS


def _values(doc: Any, key: str) -> list[Any]:
    """Every value of ``key`` anywhere in a decoded TOML document."""
    if not isinstance(doc, dict):
        return []
    return [v for k, v in doc.items() if k == key] + [
        found for v in doc.values() for found in _values(v, key)]


def _tolerate_key() -> str:
    """The annotation the fail-closed runtime snippet honours (deploy/runtime)."""
    path = s.RUNTIME / "containerd-2.2-fail-closed.toml"
    with path.open("rb") as f:
        found = _values(tomllib.load(f), "tolerate_missing_plugins_annotation")
    assert len(found) == 1 and isinstance(found[0], str), f"{path.name}: {found}"
    return found[0]


TOLERATE = _tolerate_key()


def guarded_keys() -> set[str]:
    """The keys the admission policy must guard, as the policy's lists write them: the exact
    keys of ``trusted_keys.EXACT_KEYS`` (the one declaration: koordinator's keys and the tolerate
    annotation) and ``<domain>/`` for each of ``trusted_keys.ANNOTATION_DOMAINS``. Read when
    called, so a key or domain added to the declaration is one the policy must guard."""
    exact = set(trusted_keys.EXACT_KEYS)
    domains = set(trusted_keys.ANNOTATION_DOMAINS)
    assert len(exact) >= 12 and len(domains) >= 5, "trusted_keys lost its keys"
    # The runtime snippet's annotation is declared, by name and as a domain.
    assert TOLERATE in exact and TOLERATE in domains, TOLERATE
    return exact | {f"{d}/" for d in domains}


def is_guarded(key: str) -> bool:
    """Whether a pod label/annotation ``key`` is one the admission policy must guard: one of
    ``trusted_keys.EXACT_KEYS`` or under one of ``trusted_keys.ANNOTATION_DOMAINS``."""
    return (key in trusted_keys.EXACT_KEYS
            or any(key.startswith(f"{d}/") for d in trusted_keys.ANNOTATION_DOMAINS))


def sources() -> list[dict[str, Any]]:
    """The admission objects as the files write them (a fresh copy per call): the resources
    of the kustomization, and its params ConfigMap built from the generator's literals as
    kustomize builds it (test_admission_manifests.py checks that the rendering agrees)."""
    k = s.kustomization(ADMISSION)
    docs = [d for rel in k["resources"] for d in s.load_docs(ADMISSION / rel)]
    for gen in k["configMapGenerator"]:
        assert set(gen) == {"name", "namespace", "literals", "options"}, gen
        data = dict(entry.split("=", 1) for entry in gen["literals"])
        docs.append({"apiVersion": "v1", "kind": "ConfigMap", "data": data,
                     "metadata": {"name": gen["name"], "namespace": gen["namespace"]}})
    return docs


def policy_of(docs: list[dict[str, Any]], params: bool = True) -> ar.AdmissionPolicy:
    bindings = [d for d in docs if d["kind"] == "ValidatingAdmissionPolicyBinding"]
    configmaps = [d for d in docs if d["kind"] == "ConfigMap"] if params else []
    return ar.AdmissionPolicy(s.one(docs, "ValidatingAdmissionPolicy"), bindings, configmaps)


def pod(labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
        namespace: str = "team-a", name: str = "web-0") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels is not None:
        meta["labels"] = labels
    if annotations is not None:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": [{"name": "app", "image": "nginx"}]},
            "status": {"phase": "Pending"}}


def create(obj: dict[str, Any], user: str = AUTHOR, **kw: Any) -> dict[str, Any]:
    return ar.request("CREATE", obj, None, user=user, namespace=obj["metadata"]["namespace"],
                      **kw)


def update(old: dict[str, Any], new: dict[str, Any], user: str = AUTHOR,
           **kw: Any) -> dict[str, Any]:
    return ar.request("UPDATE", new, old, user=user, namespace=new["metadata"]["namespace"],
                      **kw)


def refused(policy: ar.AdmissionPolicy, req: dict[str, Any], *mentions: str) -> str:
    verdict = policy.review(req)
    assert verdict.matched and not verdict.allowed, f"allowed: {verdict}"
    for text in mentions:
        assert text in verdict.message, f"{text!r} not in {verdict.message!r}"
    return verdict.message


def allowed(policy: ar.AdmissionPolicy, req: dict[str, Any]) -> ar.Verdict:
    verdict = policy.review(req)
    assert verdict.allowed, f"refused: {verdict.message}"
    return verdict


def params_of(docs: list[dict[str, Any]]) -> dict[str, str]:
    """The data of the params ConfigMap among ``docs``."""
    data: dict[str, str] = s.one(docs, "ConfigMap", PARAMS)["data"]
    return data
