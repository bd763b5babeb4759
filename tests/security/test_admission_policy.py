"""Pod metadata is input: who may set the pod keys the node policies trust (issue 42).

Nothing shipped restricted who may write the koordinator labels and annotations the policies
trust, nor the tolerate-missing-nri-plugins annotation. deploy/kubernetes/admission's
ValidatingAdmissionPolicy does; its CEL runs here on AdmissionReview-shaped requests
(``tests.deploy.admission_review``: the API server's order of work, the policy server's CEL
library) for the cases of the issue: a pod author's forged keys refused, koordinator's service
accounts allowed, unrelated updates and kubelet's status writes passing. Each allowed case is
also shown refused once one thing about it is wrong (a key renamed, another service account),
and the other way round. The policy's key lists are held equal to the one declaration of the
guarded keys (policy_server/policies/trusted_keys.py: koordinator's keys, the tolerate
annotation, and the annotation domains of device-injector and ulimit-adjuster), and its decision
equal to ``admission_fixtures.is_guarded`` on generated keys, look-alikes among them.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from policy_server.policies import trusted_keys
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
    is_guarded,
    params_of,
    pod,
    policy_of,
    refused,
    sources,
    update,
)

pytestmark = pytest.mark.processes  # starts processes: not in make check

DEVICES = "devices.noderesource.dev"  # device-injector's devices
ULIMITS = "ulimits.noderesource.dev"  # ulimit-adjuster's rlimits
assert {DEVICES, ULIMITS} <= set(trusted_keys.ANNOTATION_DOMAINS)


@pytest.fixture(scope="module")
def policy() -> ar.AdmissionPolicy:
    return policy_of(sources())


# --- the keys ---------------------------------------------------------------------------


def _listed(vap: dict[str, Any], name: str) -> set[str]:
    (var,) = [v for v in vap["spec"]["variables"] if v["name"] == name]
    return set(re.findall(r"'([^']*)'", var["expression"]))


def _built_in(vap: dict[str, Any]) -> set[str]:
    """The policy's own keys as ``guarded_keys`` writes them (a domain as ``<domain>/``)."""
    domains = _listed(vap, "builtInDomains")
    return _listed(vap, "builtInKeys") | {f"{d}/" for d in domains}


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


def disagreements(policy: ar.AdmissionPolicy, candidates: set[str]) -> set[str]:
    """The keys on which the policy, for a pod author's pod carrying the key as a label or
    as an annotation, decides otherwise than ``is_guarded`` (guarded: refused)."""
    out = set()
    for key in candidates:
        want = is_guarded(key)
        for where, carried in (("labels", pod(labels={key: "x"})),
                               ("annotations", pod(annotations={key: "x"}))):
            verdict = policy.review(create(carried))
            if verdict.allowed == want:
                out.add(f"{where} {key!r}: is_guarded() says {want}, allowed: {verdict.allowed}")
    return out


def lookalikes() -> set[str]:
    """Keys around every declared key and domain: each one, and its near misses (another
    domain merely starting or ending the same way, another case, a missing separator)."""
    out = {"", "app", "/", "noderesource.dev/pod", "example.com/grant", "koordinator.sh/"}
    for key in trusted_keys.EXACT_KEYS:
        out |= {key, key + "x", "x" + key, key.upper(), key.lower(), key + "/", key[:-1],
                key + "/pod", " " + key}
    for d in trusted_keys.ANNOTATION_DOMAINS:
        out |= {d, d + "/", d + "/pod", d + "/container.app", d + ".evil/x", "x" + d + "/x",
                d + "x/pod", d[:-1] + "/pod", d.upper() + "/pod", d + "//x", "/" + d + "/x",
                d + "\\x", d + ":x", d.replace(".", "-") + "/pod", d + " /pod",
                d.split(".", 1)[1] + "/pod"}
    return out


def test_every_key_the_policy_server_reads_is_guarded(policy: ar.AdmissionPolicy) -> None:
    wanted = guarded_keys()
    assert {QOS_CLASS, RESOURCE_STATUS, TOLERATE, TOLERATE + "/", DEVICES + "/",
            ULIMITS + "/"} <= wanted
    assert uncovered(policy, wanted) == set()


def test_the_built_in_lists_equal_the_declaration() -> None:
    vap = s.one(sources(), "ValidatingAdmissionPolicy")
    assert _listed(vap, "builtInKeys") == set(trusted_keys.EXACT_KEYS)
    assert _listed(vap, "builtInDomains") == set(trusted_keys.ANNOTATION_DOMAINS)
    assert _built_in(vap) == guarded_keys()


def test_the_policy_decides_as_guarded_on_lookalikes(policy: ar.AdmissionPolicy) -> None:
    candidates = lookalikes()
    # Both answers occur: the list is not all guarded, nor all not.
    assert {is_guarded(k) for k in candidates} == {True, False}
    assert len(candidates) > 150
    assert disagreements(policy, candidates) == set()


_PIECES = sorted({*trusted_keys.EXACT_KEYS, *trusted_keys.ANNOTATION_DOMAINS,
                  "noderesource.dev", "koordinator.sh", "evil"})


_KEYS = st.one_of(
    # A declared key or domain between near-miss prefixes and separators.
    st.builds(lambda *parts: "".join(parts), st.sampled_from(["", "x", "/", " "]),
              st.sampled_from(_PIECES), st.sampled_from(["/", "", ".evil/", "x/", "//", "."]),
              st.sampled_from(["pod", "container.app", "", "x"])),
    # Pieces and separators in any order, or any text.
    st.lists(st.sampled_from([*_PIECES, "/", ".", "x", "pod"]), min_size=1, max_size=4)
    .map("".join),
    st.text(max_size=20))


@settings(max_examples=150)
@given(key=_KEYS)
@example(key=f"{DEVICES}/container.app")
@example(key=f"{DEVICES}.evil/x")
def test_the_policy_decides_as_guarded_on_generated_keys(policy: ar.AdmissionPolicy,
                                                         key: str) -> None:
    assert disagreements(policy, {key}) == set()


def test_a_key_or_domain_added_to_the_declaration_is_found_uncovered(
        policy: ar.AdmissionPolicy, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trusted_keys, "EXACT_KEYS",
                        (*trusted_keys.EXACT_KEYS, "koordinator.sh/new-grant"))
    monkeypatch.setattr(trusted_keys, "ANNOTATION_DOMAINS",
                        (*trusted_keys.ANNOTATION_DOMAINS, "hooks.noderesource.dev"))
    vap = s.one(sources(), "ValidatingAdmissionPolicy")
    assert _built_in(vap) != guarded_keys()
    assert uncovered(policy, guarded_keys()) == {
        "label koordinator.sh/new-grant", "annotation koordinator.sh/new-grant",
        "label hooks.noderesource.dev/", "annotation hooks.noderesource.dev/"}
    found = disagreements(policy, lookalikes())
    assert any("'koordinator.sh/new-grant'" in f for f in found)
    assert any("'hooks.noderesource.dev/pod'" in f for f in found)


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
    assert disagreements(mutated, lookalikes()) == {
        f"{where} {RESOURCE_STATUS!r}: is_guarded() says True, allowed: True"
        for where in ("labels", "annotations")}


def test_a_domain_dropped_from_the_policy_is_found_uncovered() -> None:
    docs = sources()
    vap = s.one(docs, "ValidatingAdmissionPolicy")
    (var,) = [v for v in vap["spec"]["variables"] if v["name"] == "builtInDomains"]
    assert f"'{ULIMITS}'," in var["expression"]
    var["expression"] = var["expression"].replace(f"'{ULIMITS}',", "")
    dropped = policy_of(docs)
    assert uncovered(dropped, guarded_keys()) == {
        f"label {ULIMITS}/", f"annotation {ULIMITS}/"}
    assert _built_in(vap) != guarded_keys()
    assert any(f"'{ULIMITS}/pod'" in f for f in disagreements(dropped, lookalikes()))


def _variable(docs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    vap = s.one(docs, "ValidatingAdmissionPolicy")
    (var,) = [v for v in vap["spec"]["variables"] if v["name"] == name]
    return var  # type: ignore[no-any-return]


def test_a_domain_matched_otherwise_than_as_domain_slash_is_found() -> None:
    # By name only (the domains listed without their "/"): their keys pass.
    docs = sources()
    var = _variable(docs, "trustedKeys")
    assert "map(d, d + '/')" in var["expression"]
    var["expression"] = var["expression"].replace("map(d, d + '/')", "map(d, d)")
    found = disagreements(policy_of(docs), lookalikes())
    assert f"annotations '{DEVICES}/container.app': is_guarded() says True, allowed: True" in found
    # As a bare prefix (without the "/"): the look-alike domains are refused too.
    docs = sources()
    var = _variable(docs, "newAnnotationKeys")
    match = "(t.endsWith('/') && k.startsWith(t))"
    assert match in var["expression"]
    var["expression"] = var["expression"].replace(
        match, "(t.endsWith('/') && k.startsWith(t.substring(0, size(t) - 1)))")
    found = disagreements(policy_of(docs), lookalikes())
    assert f"annotations '{DEVICES}.evil/x': is_guarded() says False, allowed: False" in found
    assert not any(f.startswith("labels") for f in found)


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


@pytest.mark.parametrize("key", [f"{DEVICES}/container.app", f"{DEVICES}/pod",
                                 f"{ULIMITS}/pod", f"{ULIMITS}/container.app",
                                 "mounts.noderesource.dev/container.app",
                                 "cdi-devices.noderesource.dev/pod"])
def test_a_pod_author_cannot_ask_for_devices_mounts_or_rlimits(policy: ar.AdmissionPolicy,
                                                               key: str) -> None:
    value = '[{"path": "/dev/mem", "type": "c", "major": 1, "minor": 1}]'
    forged = pod(annotations={key: value})
    refused(policy, create(forged), AUTHOR, f"annotation {key}")
    refused(policy, create(forged, user=REPLICASET), REPLICASET)
    old = pod(annotations={"note": "a"})
    refused(policy, update(old, pod(annotations={"note": "a", key: value})), f"annotation {key}")
    # Mutated: koord-manager's service account, or a pod of an exempt namespace, may.
    allowed(policy, create(forged, user=KOORD_MANAGER))
    exempt = pod(annotations={key: value}, namespace="kube-system")
    assert not allowed(policy, create(exempt)).matched


@pytest.mark.parametrize("key", [f"{DEVICES}.evil/x", f"x{DEVICES}/x", f"{ULIMITS}x/pod",
                                 f"{ULIMITS}", f"{DEVICES}", "noderesource.dev/pod"])
def test_a_lookalike_of_a_guarded_domain_is_not_guarded(policy: ar.AdmissionPolicy,
                                                        key: str) -> None:
    assert not is_guarded(key)
    verdict = allowed(policy, create(pod(annotations={key: "x"}, labels={key: "x"})))
    assert verdict.matched, "checked, and found to carry no guarded key"


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
    params_of(docs)["trustedKeys"] = " grants.example.com/ , example.com/grant,"
    extended = policy_of(docs)
    refused(extended, create(pod(annotations={"grants.example.com/container.app": "x"})))
    refused(extended, create(pod(labels={"example.com/grant": "x"})))
    allowed(extended, create(pod(annotations={"example.com/grants": "x"})))
    allowed(extended, create(pod(annotations={"grants.example.com.evil/x": "x"})))
    # The built-in keys and domains stay guarded.
    refused(extended, create(pod(annotations={f"{DEVICES}/container.app": "x"})))
    # Mutated: the shipped params guard neither.
    shipped = policy_of(sources())
    allowed(shipped, create(pod(annotations={"grants.example.com/container.app": "x"})))
    allowed(shipped, create(pod(labels={"example.com/grant": "x"})))


def test_params_without_entries_trust_nobody() -> None:
    docs = sources()
    s.one(docs, "ConfigMap", PARAMS)["data"] = {}
    bare = policy_of(docs)
    refused(bare, create(pod(labels={QOS_CLASS: "BE"}), user=KOORD_SCHEDULER))
    refused(bare, create(pod(labels={QOS_CLASS: "BE"}, namespace="kube-system")))
    del s.one(docs, "ConfigMap", PARAMS)["data"]
    refused(policy_of(docs), create(pod(labels={QOS_CLASS: "BE"}), user=KOORD_MANAGER))
    allowed(policy_of(docs), create(pod(labels={"app": "web"})))
