"""Pod metadata is input: who may set the pod keys the node policies trust (issue 42).

Nothing shipped restricted who may write the koordinator labels and annotations the policies
trust, nor the tolerate-missing-nri-plugins annotation. deploy/kubernetes/admission's
ValidatingAdmissionPolicy does; its CEL runs here on AdmissionReview-shaped requests
(``tests.deploy.admission_review``: the API server's order of work, the policy server's CEL
library) for the cases of the issue: a pod author's forged keys refused, koordinator's service
accounts allowed, unrelated updates and kubelet's status writes passing. Each allowed case is
also shown refused once one thing about it is wrong (a key renamed, another service account),
and the other way round. The policy's key list is held equal to the keys the code declares
(koordinator_qos/keys.py and the runtime's tolerate annotation).
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from policy_server.policies.koordinator_qos import keys
from tests.deploy import admission_review as ar
from tests.deploy import support as s
from tests.deploy.admission_fixtures import (
    AUTHOR,
    KOORD_MANAGER,
    KOORD_SCHEDULER,
    KUBELET,
    PARAMS,
    QOS_CLASS,
    REPLICASET,
    RESOURCE_STATUS,
    TOLERATE,
    allowed,
    create,
    guarded_keys,
    params_of,
    pod,
    policy_of,
    refused,
    sources,
    update,
)


@pytest.fixture(scope="module")
def policy() -> ar.AdmissionPolicy:
    return policy_of(sources())


# --- the keys ---------------------------------------------------------------------------


def _built_in(vap: dict[str, Any]) -> set[str]:
    (var,) = [v for v in vap["spec"]["variables"] if v["name"] == "builtInKeys"]
    return set(re.findall(r"'([^']*)'", var["expression"]))


def uncovered(policy: ar.AdmissionPolicy, wanted: set[str]) -> set[str]:
    """The keys of ``wanted`` a pod author's pod may carry, as a label or an annotation,
    without the policy refusing it (an entry ending in / is tried as <entry>pod)."""
    out = set()
    for key in wanted:
        probe = key + "pod" if key.endswith("/") else key
        if policy.review(create(pod(labels={probe: "x"}))).allowed:
            out.add(f"label {key}")
        if policy.review(create(pod(annotations={probe: "x"}))).allowed:
            out.add(f"annotation {key}")
    return out


def test_every_key_the_policy_server_reads_is_guarded(policy: ar.AdmissionPolicy) -> None:
    wanted = guarded_keys()
    assert {QOS_CLASS, RESOURCE_STATUS, TOLERATE} <= wanted
    assert uncovered(policy, wanted) == set()


def test_the_built_in_list_equals_the_guarded_keys() -> None:
    vap = s.one(sources(), "ValidatingAdmissionPolicy")
    assert _built_in(vap) == guarded_keys()


def test_a_key_dropped_from_the_policy_is_found_uncovered() -> None:
    docs = sources()
    vap = s.one(docs, "ValidatingAdmissionPolicy")
    (var,) = [v for v in vap["spec"]["variables"] if v["name"] == "builtInKeys"]
    assert f"'{RESOURCE_STATUS}'," in var["expression"]
    var["expression"] = var["expression"].replace(f"'{RESOURCE_STATUS}',", "")
    mutated = policy_of(docs)
    assert uncovered(mutated, guarded_keys()) == {
        f"label {RESOURCE_STATUS}", f"annotation {RESOURCE_STATUS}"}
    assert _built_in(vap) != guarded_keys()


def _trusted_in_rules() -> dict[Path, list[str]]:
    """The ``trust: {annotations: [...]}`` list of every shipped rules file (empty: none)."""
    out = {}
    files = [*s.DEPLOY.rglob("rules.yaml"), *(s.REPO / "examples").rglob("*rules*.yaml")]
    assert len(files) >= 4
    for path in files:
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        if "groups" in doc:  # Prometheus alerting rules
            continue
        trust = doc.get("trust") or {}
        out[path] = list(trust.get("annotations") or [])
    return out


def test_every_annotation_a_shipped_rules_file_trusts_is_guarded(
        policy: ar.AdmissionPolicy) -> None:
    trusted = {key for found in _trusted_in_rules().values() for key in found}
    assert uncovered(policy, trusted) == set()
    # The same check reports a trusted key nobody guards.
    assert uncovered(policy, trusted | {"example.com/grant"}) == {
        "label example.com/grant", "annotation example.com/grant"}


# --- pod authors ------------------------------------------------------------------------


def test_a_pod_author_cannot_create_a_pod_with_the_schedulers_cpuset(
        policy: ar.AdmissionPolicy) -> None:
    forged = pod(annotations={RESOURCE_STATUS: '{"cpuset":"0-63"}'})
    refused(policy, create(forged), AUTHOR, f"annotation {RESOURCE_STATUS}")
    # Through its controller too: the ReplicaSet controller creates what the author wrote.
    refused(policy, create(forged, user=REPLICASET), REPLICASET)
    # Mutated: a key that is not koordinator's passes.
    allowed(policy, create(pod(annotations={RESOURCE_STATUS + "x": '{"cpuset":"0-63"}'})))


def test_a_pod_author_cannot_label_a_pod_best_effort(policy: ar.AdmissionPolicy) -> None:
    refused(policy, create(pod(labels={QOS_CLASS: "BE"})), f"label {QOS_CLASS}")
    refused(policy, create(pod(annotations={QOS_CLASS: "BE"})), f"annotation {QOS_CLASS}")
    # Mutated: keys differing in case or domain are someone else's.
    allowed(policy, create(pod(labels={"koordinator.sh/qosclass": "BE", "app": "web"})))
    allowed(policy, create(pod(labels={"example.com/qosClass": "BE"})))


@pytest.mark.parametrize("suffix", ["", "/pod", "/container.app"])
def test_a_pod_author_cannot_opt_out_of_fail_closed(policy: ar.AdmissionPolicy,
                                                    suffix: str) -> None:
    refused(policy, create(pod(annotations={TOLERATE + suffix: "true"})),
            f"annotation {TOLERATE + suffix}")
    # Mutated: another domain that merely starts the same way.
    allowed(policy, create(pod(annotations={TOLERATE + "x" + suffix: "true"})))


def test_a_plain_pod_is_allowed_and_an_empty_metadata_too(policy: ar.AdmissionPolicy) -> None:
    assert allowed(policy, create(pod())).matched
    assert allowed(policy, create(pod(labels={"app": "web"}, annotations={}))).matched


def test_the_message_names_every_refused_key(policy: ar.AdmissionPolicy) -> None:
    forged = pod(labels={QOS_CLASS: "LSR"},
                 annotations={keys.ANNOTATION_OOM_SCORE_ADJ: "-1000", "note": "x"})
    message = refused(policy, create(forged), f"label {QOS_CLASS}",
                      f"annotation {keys.ANNOTATION_OOM_SCORE_ADJ}")
    assert "note" not in message


# --- koordinator's service accounts -----------------------------------------------------


def test_koord_scheduler_may_annotate_a_pod(policy: ar.AdmissionPolicy) -> None:
    old = pod(labels={"app": "web"})
    new = pod(labels={"app": "web"}, annotations={RESOURCE_STATUS: '{"cpuset":"2-3"}'})
    verdict = allowed(policy, update(old, new, user=KOORD_SCHEDULER))
    assert not verdict.matched, "the scheduler's requests are not checked at all"
    allowed(policy, create(new, user=KOORD_MANAGER))
    # Mutated: the same name in another namespace, another name, a user named like it.
    for user in ("system:serviceaccount:default:koord-scheduler",
                 "system:serviceaccount:koordinator-system:koord-schedulerx",
                 "system:serviceaccount:koordinator-system:koord-descheduler",
                 "koordinator-system/koord-scheduler", "koord-scheduler"):
        refused(policy, update(old, new, user=user), user)


def test_pods_binding_may_carry_keys_only_from_the_trusted_accounts(
        policy: ar.AdmissionPolicy) -> None:
    binding: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "web-0", "namespace": "team-a",
                     "annotations": {RESOURCE_STATUS: '{"cpuset":"0-63"}'}},
        "target": {"kind": "Node", "name": "node-1"}}
    req = create(binding, user="system:kube-scheduler", subresource="binding")
    refused(policy, req, f"annotation {RESOURCE_STATUS}")
    allowed(policy, create(binding, user=KOORD_SCHEDULER, subresource="binding"))
    del binding["metadata"]["annotations"]
    assert allowed(policy, create(binding, user="system:kube-scheduler",
                                  subresource="binding")).matched


# --- updates ----------------------------------------------------------------------------


def _scheduled() -> dict[str, Any]:
    """A pod koord-scheduler annotated and koord-manager labelled, as stored."""
    return pod(labels={"app": "web", QOS_CLASS: "LSR"},
               annotations={RESOURCE_STATUS: '{"cpuset":"2-3"}', "note": "a"})


def test_an_update_adding_a_key_is_refused(policy: ar.AdmissionPolicy) -> None:
    old = pod(labels={"app": "web"})
    new = copy.deepcopy(old)
    new["metadata"]["annotations"] = {keys.ANNOTATION_OOM_SCORE_ADJ: "-1000"}
    refused(policy, update(old, new), f"annotation {keys.ANNOTATION_OOM_SCORE_ADJ}")
    new["metadata"]["labels"][QOS_CLASS] = "BE"
    refused(policy, update(old, new), f"label {QOS_CLASS}")


def test_an_update_changing_or_removing_a_key_is_refused(policy: ar.AdmissionPolicy) -> None:
    old = _scheduled()
    altered = copy.deepcopy(old)
    altered["metadata"]["annotations"][RESOURCE_STATUS] = '{"cpuset":"0-63"}'
    refused(policy, update(old, altered), f"annotation {RESOURCE_STATUS}")
    removed = copy.deepcopy(old)
    del removed["metadata"]["labels"][QOS_CLASS]
    refused(policy, update(old, removed), f"label {QOS_CLASS}")
    no_annotations = copy.deepcopy(old)
    del no_annotations["metadata"]["annotations"]
    refused(policy, update(old, no_annotations), f"annotation {RESOURCE_STATUS}")
    # Moving a key from the labels to the annotations is a change of both.
    moved = copy.deepcopy(old)
    moved["metadata"]["annotations"][QOS_CLASS] = moved["metadata"]["labels"].pop(QOS_CLASS)
    refused(policy, update(old, moved), f"label {QOS_CLASS}", f"annotation {QOS_CLASS}")


def test_an_unrelated_update_of_a_scheduled_pod_is_allowed(policy: ar.AdmissionPolicy) -> None:
    old = _scheduled()
    new = copy.deepcopy(old)
    new["metadata"]["labels"]["version"] = "2"
    new["metadata"]["annotations"]["note"] = "b"
    new["spec"]["containers"][0]["image"] = "nginx:1.27"
    verdict = allowed(policy, update(old, new))
    assert verdict.matched, "checked, and found to leave the trusted keys as they were"
    # Mutated: the same update with the scheduler's value changed too.
    new["metadata"]["annotations"][RESOURCE_STATUS] = '{"cpuset":"2-4"}'
    refused(policy, update(old, new), f"annotation {RESOURCE_STATUS}")


def test_kubelets_status_update_passes(policy: ar.AdmissionPolicy) -> None:
    old = _scheduled()
    new = copy.deepcopy(old)
    new["status"] = {"phase": "Running", "podIP": "10.0.0.7"}
    req = update(old, new, user=KUBELET, subresource="status", groups=("system:nodes",))
    assert allowed(policy, req).matched, "checked, and found to leave the keys as they were"
    # Mutated: a status write that changes a key is refused (the API server keeps a status
    # write's metadata), from kubelet as from a tenant's controller.
    new["metadata"]["annotations"][RESOURCE_STATUS] = '{"cpuset":"0-63"}'
    refused(policy, update(old, new, user=KUBELET, subresource="status"), KUBELET)
    refused(policy, update(old, new, user=REPLICASET, subresource="status"), REPLICASET)
    allowed(policy, update(old, new, user=KOORD_MANAGER, subresource="status"))


def test_without_params_status_writes_pass_and_pods_are_refused() -> None:
    without = policy_of(sources(), params=False)
    old = _scheduled()
    new = copy.deepcopy(old)
    new["status"] = {"phase": "Running"}
    assert without.review(update(old, new, user=KUBELET, subresource="status")) == ar.Verdict(
        matched=False, allowed=True)
    verdict = without.review(create(pod()))
    assert verdict.matched and not verdict.allowed and "params" in verdict.message
    verdict = without.review(update(old, new, user=KUBELET))
    assert verdict.matched and not verdict.allowed


@pytest.mark.parametrize("subresource", ["ephemeralcontainers", "resize", "eviction"])
def test_other_subresources_are_not_matched(policy: ar.AdmissionPolicy,
                                            subresource: str) -> None:
    old = _scheduled()
    for op in ("CREATE", "UPDATE"):
        req = ar.request(op, old, old if op == "UPDATE" else None, user=AUTHOR,
                         namespace="team-a", subresource=subresource)
        assert policy.review(req) == ar.Verdict(matched=False, allowed=True)


def test_deletes_are_not_matched(policy: ar.AdmissionPolicy) -> None:
    req = ar.request("DELETE", None, _scheduled(), user=AUTHOR, namespace="team-a")
    assert policy.review(req) == ar.Verdict(matched=False, allowed=True)


# --- namespaces and params --------------------------------------------------------------


def test_kube_system_is_exempt_and_a_lookalike_is_not(policy: ar.AdmissionPolicy) -> None:
    cni = pod(annotations={TOLERATE + "/pod": "true"}, namespace="kube-system")
    assert not allowed(policy, create(cni, user=REPLICASET)).matched
    cni["metadata"]["namespace"] = "kube-system-x"
    refused(policy, create(cni, user=REPLICASET))


def test_params_add_keys_and_prefixes() -> None:
    docs = sources()
    params_of(docs)["trustedKeys"] = " devices.noderesource.dev/ , example.com/grant,"
    extended = policy_of(docs)
    refused(extended, create(pod(annotations={"devices.noderesource.dev/container.app": "x"})))
    refused(extended, create(pod(labels={"example.com/grant": "x"})))
    allowed(extended, create(pod(annotations={"example.com/grants": "x"})))
    # Mutated: the shipped params guard neither.
    shipped = policy_of(sources())
    allowed(shipped, create(pod(annotations={"devices.noderesource.dev/container.app": "x"})))


def test_params_without_entries_trust_nobody() -> None:
    docs = sources()
    s.one(docs, "ConfigMap", PARAMS)["data"] = {}
    bare = policy_of(docs)
    refused(bare, create(pod(labels={QOS_CLASS: "BE"}), user=KOORD_SCHEDULER))
    refused(bare, create(pod(labels={QOS_CLASS: "BE"}, namespace="kube-system")))
    del s.one(docs, "ConfigMap", PARAMS)["data"]
    refused(policy_of(docs), create(pod(labels={QOS_CLASS: "BE"}), user=KOORD_MANAGER))
    allowed(policy_of(docs), create(pod(labels={"app": "web"})))
