"""Reading manifests: every supported shape, and bad documents named with their field."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from bridge.kube import ManifestError, load_pods, parse_documents, pods_of
from bridge.kube.model import ContainerKind, Pod

MANIFESTS = Path(__file__).parent / "manifests"


def pods(text: str, name: str = "m.yaml") -> list[Pod]:
    out: list[Pod] = []
    for where, doc in parse_documents(textwrap.dedent(text), name):
        out.extend(pods_of(doc, where))
    return out


POD = "kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i}]}\n"


@pytest.mark.parametrize("kind", ["Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job"])
def test_workload_templates(kind: str) -> None:
    (pod,) = pods(f"""
        kind: {kind}
        metadata: {{name: w, namespace: ns}}
        spec:
          template:
            metadata: {{labels: {{app: w}}}}
            spec: {{containers: [{{name: c, image: i}}]}}
        """)
    assert pod.namespace == "ns" and pod.name.startswith("w-")
    assert dict(pod.labels)["app"] == "w"
    assert [c.name for c in pod.containers] == ["c"]


def test_cronjob_template_and_json_and_multi_document(tmp_path: Path) -> None:
    path = tmp_path / "all.yaml"
    path.write_text(POD + "---\n" + textwrap.dedent("""
        kind: CronJob
        metadata: {name: cj}
        spec: {jobTemplate: {spec: {template: {spec: {containers: [{name: c, image: i}]}}}}}
        ---
        """) + '{"kind": "Pod", "metadata": {"name": "j"}, '
               '"spec": {"containers": [{"name": "c", "image": "i"}]}}\n')
    got = load_pods([str(path)])
    assert (got[0].name, got[2].name, len(got)) == ("p", "j", 3)
    assert got[1].name.startswith("cj-") and dict(got[1].labels)["job-name"].startswith("cj-")


def test_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    monkeypatch.setattr("sys.stdin", io.StringIO(POD))
    (pod,) = load_pods(["-"])
    assert pod.name == "p"


def test_init_and_sidecar_kinds_and_defaulting() -> None:
    (pod,) = pods("""
        kind: Pod
        metadata: {name: p}
        spec:
          initContainers:
            - {name: a, image: i}
            - {name: b, image: i, restartPolicy: Always}
          containers:
            - {name: c, image: i, resources: {limits: {cpu: 1, memory: 1Gi}}}
        """)
    assert [(c.name, c.kind) for c in pod.containers] == [
        ("a", ContainerKind.INIT), ("b", ContainerKind.SIDECAR), ("c", ContainerKind.REGULAR)]
    c = pod.containers[2]
    assert c.requests == c.limits  # the API server copies limits into missing requests


def test_token_volume_added_once() -> None:
    (pod,) = pods(POD)
    assert [m.mount_path for m in pod.containers[0].mounts] == [
        "/var/run/secrets/kubernetes.io/serviceaccount"]
    (without,) = pods(POD.replace("spec: {", "spec: {automountServiceAccountToken: false, "))
    assert without.containers[0].mounts == ()
    (from_api,) = load_pods([str(MANIFESTS / "kubectl-get-list.yaml")])[:1]
    assert [v.name for v in from_api.volumes] == ["kube-api-access-abcde"]


@pytest.mark.parametrize(("text", "field", "problem"), [
    ("kind: Secret\nmetadata: {name: s}\n", "kind", "unknown kind 'Secret'"),
    ("metadata: {name: s}\n", "kind", "missing"),
    ("kind: Pod\nspec: {containers: [{name: c, image: i}]}\n", "metadata.name", "missing"),
    ("kind: Pod\nmetadata: {name: Bad_Name}\nspec: {containers: [{name: c, image: i}]}\n",
     "metadata.name", "not a DNS subdomain"),
    ("kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n",
     "spec.containers[0] (c).image", "missing"),
    ("kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: '  '}]}\n",
     "spec.containers[0] (c).image", "missing"),
    ("kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i, "
     "resources: {requests: {cpu: 1.5cores}}}]}\n",
     "spec.containers[0] (c).resources.requests.cpu", "expected a quantity"),
    ("kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i, "
     "resources: {limits: {memory: -1Gi}}}]}\n",
     "spec.containers[0] (c).resources.limits.memory", "must not be negative"),
    ("kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i, "
     "resources: {requests: {cpu: 2}, limits: {cpu: 1}}}]}\n",
     "spec.containers[0] (c).resources.requests.cpu", "less than or equal to the limit"),
    ("kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i, "
     "resources: {requests: {hugepages-2Mi: 2Mi}}}]}\n",
     "spec.containers[0] (c).resources.limits.hugepages-2Mi", "equal to the request"),
    ("kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i, "
     "resources: {limits: {cpus: 1}}}]}\n",
     "spec.containers[0] (c).resources.limits.cpus", "unknown resource"),
    ("kind: Pod\nmetadata: {name: p}\nspec: {}\n", "spec.containers", "missing"),
    ("kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i}, "
     "{name: c, image: j}]}\n", "spec", "two containers are named 'c'"),
    ("kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i, "
     "volumeMounts: [{name: v, mountPath: /v}]}]}\n",
     "spec.containers[0] (c).volumeMounts[0].name", "no volume named 'v'"),
    ("kind: Deployment\nmetadata: {name: d}\nspec: {template: {spec: {containers: "
     "[{name: c}]}}}\n", "spec.template.spec.containers[0] (c).image", "missing"),
    ("kind: Deployment\nmetadata: {name: d}\nspec: {}\n", "spec.template", "missing"),
    ("kind: List\nitems: [{kind: Pod, metadata: {name: p}, spec: {containers: [{name: c}]}}]\n",
     "spec.containers[0] (c).image", "missing"),
])
def test_bad_manifests_name_document_and_field(text: str, field: str, problem: str) -> None:
    with pytest.raises(ManifestError) as info:
        pods("kind: Pod\nmetadata: {name: fine}\nspec: {containers: [{name: c, image: i}]}\n"
             "---\n" + text)
    err = info.value
    assert err.where.startswith("m.yaml document 2"), err.where
    assert err.field == field
    assert problem in err.problem
    assert str(err).startswith("m.yaml document 2")


def test_list_items_are_named() -> None:
    with pytest.raises(ManifestError) as info:
        pods("kind: List\nitems: [{kind: Pod, metadata: {name: p}, spec: {containers: []}}]\n")
    assert info.value.where == "m.yaml items[0] (Pod p)"


def test_not_yaml() -> None:
    with pytest.raises(ManifestError, match=r"m\.yaml: not YAML or JSON"):
        pods("kind: [unclosed\n")


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="cannot read"):
        load_pods([str(tmp_path / "missing.yaml")])


@pytest.mark.parametrize(("text", "exact"), [("1Ei", 2**60), ("1E", 10**18), ("2e3", 2000)])
def test_exa_quantities(text: str, exact: int) -> None:
    """`E` is exa and `Ei` exbi; `e`/`E` followed by digits is an exponent (issue 25: `1Ei`
    crashed with "invalid literal for int()")."""
    resources = f"resources: {{limits: {{memory: {text}}}}}"
    (pod,) = pods(POD.replace("image: i}", f"image: i, {resources}}}"))
    assert dict(pod.containers[0].limits)["memory"] == exact
