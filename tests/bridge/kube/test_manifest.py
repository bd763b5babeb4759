"""Reading manifests: every supported shape, and bad documents named with their field."""

from __future__ import annotations

import textwrap
from fractions import Fraction
from pathlib import Path

import pytest

from bridge.kube import ManifestError, load_pods, parse_documents, pods_of, read_manifests
from bridge.kube.pod_spec import ContainerKind, PodSpec

MANIFESTS = Path(__file__).parent / "manifests"


def pods(text: str, name: str = "m.yaml") -> list[PodSpec]:
    out: list[PodSpec] = []
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
    ("kind: Secret\nmetadata: {name: s}\n", "kind", "a Secret makes no pod"),
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
    ("kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i, "
     "env: [{name: A, value: a}, {value: b}]}]}\n", "spec.containers[0] (c).env[1].name",
     "missing"),
    ("kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i, "
     "env: [{name: A, valueFrom: {}}]}]}\n", "spec.containers[0] (c).env[0].valueFrom",
     "needs exactly one source"),
    ("kind: Pod\nmetadata: {name: p}\nspec: {volumes: [{name: ''}], containers: "
     "[{name: c, image: i}]}\n", "spec.volumes[0].name", "missing"),
    ("kind: Pod\nmetadata: {name: p}\nspec: {volumes: [{name: v, hostPath: {}}], "
     "containers: [{name: c, image: i}]}\n", "spec.volumes[0].hostPath.path",
     "expected a string"),
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


def test_pod_level_resources_read_and_defaulted() -> None:
    (pod,) = pods(POD.replace("spec: {", "spec: {resources: {limits: {cpu: 1, memory: 1Gi}}, "))
    assert pod.pod_limits == (("cpu", Fraction(1)), ("memory", Fraction(2**30)))
    assert pod.pod_requests == pod.pod_limits  # the API server's defaulting


@pytest.mark.parametrize(("resources", "field", "problem"), [
    ("{limits: {hugepages-2Mi: 2Mi}}", "spec.resources.limits.hugepages-2Mi",
     "only cpu and memory"),
    ("{requests: {cpu: 2}, limits: {cpu: 1}}", "spec.resources.requests.cpu",
     "less than or equal to the limit"),
    ("{limits: {cpu: lots}}", "spec.resources.limits.cpu", "expected a quantity"),
])
def test_bad_pod_level_resources(resources: str, field: str, problem: str) -> None:
    with pytest.raises(ManifestError) as info:
        pods(POD.replace("spec: {", f"spec: {{resources: {resources}, "))
    assert (info.value.field, problem in info.value.problem) == (field, True)


STATEFULSET = """
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: mysql, namespace: db}
spec:
  replicas: 2
  template:
    spec:
      containers:
      - name: mysql
        image: mysql:8
        volumeMounts: [{name: data, mountPath: /var/lib/mysql}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 10Gi}}}
"""


def test_statefulset_claim_templates_are_volumes() -> None:
    """Each claim template becomes a volume of the same name bound to the pod's claim
    `<template>-<set>-<ordinal>` (issue 25: exit 2 "no volume named 'data'")."""
    first, second = pods(STATEFULSET)
    assert (first.name, second.name) == ("mysql-0", "mysql-1")
    data = {p.name: next(v for v in p.volumes if v.name == "data") for p in (first, second)}
    assert data["mysql-0"].kind == "persistentVolumeClaim"
    assert (data["mysql-0"].host_path, data["mysql-1"].host_path) == ("data-mysql-0",
                                                                      "data-mysql-1")
    assert dict(second.labels)["apps.kubernetes.io/pod-index"] == "1"


def test_runtime_class_name_is_the_runtime_handler() -> None:
    (pod,) = pods(POD.replace("spec: {", "spec: {runtimeClassName: kata, "))
    assert pod.runtime_handler == "kata"


def test_runtime_class_in_the_manifests_gives_its_handler(tmp_path: Path) -> None:
    path = tmp_path / "gvisor.yaml"
    path.write_text("apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: gvisor}\n"
                    "handler: runsc\n---\n"
                    + POD.replace("spec: {", "spec: {runtimeClassName: gvisor, "))
    loaded = read_manifests([str(path)])
    assert [p.runtime_handler for p in loaded.pods] == ["runsc"]
    assert loaded.skipped == (f"{path} document 1 (RuntimeClass gvisor): skipped, a "
                              "RuntimeClass makes no pod; expected one of Pod, Deployment, "
                              "ReplicaSet, ReplicationController, StatefulSet, DaemonSet, Job, "
                              "CronJob, List, PodList",)


MIXED = """
apiVersion: v1
kind: Service
metadata: {name: web}
spec: {ports: [{port: 80}]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: web-config}
data: {a: b}
---
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata: {name: web}
spec: {}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  template:
    spec: {containers: [{name: c, image: i}]}
---
apiVersion: v1
kind: ReplicationController
metadata: {name: legacy}
spec:
  template:
    spec: {containers: [{name: c, image: i}]}
"""


def test_mixed_file_skips_what_makes_no_pod(tmp_path: Path) -> None:
    path = tmp_path / "bundle.yaml"
    path.write_text(MIXED)
    loaded = read_manifests([str(path)])
    assert [n.split(":")[0] for n in loaded.skipped] == [
        f"{path} document 1 (Service web)", f"{path} document 2 (ConfigMap web-config)",
        f"{path} document 3 (ServiceMonitor web)"]
    names = [p.name for p in loaded.pods]
    assert len(names) == 3 and names[0].startswith("web-") and names[2].startswith("legacy-")
    assert len(set(names)) == 3
    with pytest.raises(ManifestError) as info:
        read_manifests([str(path)], strict=True)
    assert (info.value.field, info.value.problem.startswith("a Service makes no pod")) == \
        ("kind", True)


def test_replicas_each_a_pod_with_a_stable_name_and_uid() -> None:
    text = MIXED.split("---")[3]
    a, b = pods(text)
    again = pods(text)
    assert [(p.name, p.uid) for p in again] == [(a.name, a.uid), (b.name, b.uid)]
    assert a.uid != b.uid
    hash_a = a.name.split("-")[1]
    assert b.name.split("-")[1] == hash_a == dict(a.labels)["pod-template-hash"]
    assert [p.name for p in pods(text.replace("replicas: 2", "replicas: 0"))] == []
    many = [p.name for p in load_pods_text(text, replicas=4)]
    assert len(set(many)) == 4 and many[:2] == [a.name, b.name]
    sts = [p.name for p in load_pods_text(STATEFULSET, replicas=3)]
    assert sts == ["mysql-0", "mysql-1", "mysql-2"]


def load_pods_text(text: str, replicas: int | None = None) -> list[PodSpec]:
    out: list[PodSpec] = []
    for where, doc in parse_documents(textwrap.dedent(text), "m.yaml"):
        out.extend(pods_of(doc, where, replicas=replicas))
    return out


@pytest.mark.parametrize(("text", "field", "problem"), [
    ("apiVersion: apps/v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n",
     "apiVersion", "'apps/v1' does not serve Pod; expected 'v1'"),
    ("apiVersion: extensions/v1beta1\nkind: Deployment\nmetadata: {name: d}\nspec: {}\n",
     "apiVersion", "expected 'apps/v1'"),
    ("apiVersion: batch/v1beta1\nkind: CronJob\nmetadata: {name: c}\nspec: {}\n",
     "apiVersion", "expected 'batch/v1'"),
    ("kind: Pod\nmetadata: {name: p}\n", "spec", "missing"),
    ("kind: Pod\nmetadata: {name: p}\nspec:\n", "spec", "missing"),
    ("kind: Deployment\nmetadata: {name: d}\n", "spec", "missing"),
    ("kind: Deployment\nmetadata: {name: d}\nspec: {replicas: -1, template: {}}\n",
     "spec.replicas", "non-negative integer"),
    ("kind: StatefulSet\nmetadata: {name: s}\nspec: {template: {spec: {containers: []}}, "
     "volumeClaimTemplates: [{spec: {}}]}\n",
     "spec.volumeClaimTemplates[0].metadata.name", "missing"),
    ("kind: Pod\nmetadata: {name: p}\nspec: {priorityClassName: system-node-critical, "
     "priority: 5, containers: [{name: c, image: i}]}\n", "spec.priority", "does not match"),
])
def test_kind_and_shape_errors(text: str, field: str, problem: str) -> None:
    with pytest.raises(ManifestError) as info:
        pods(text)
    assert info.value.field == field
    assert problem in info.value.problem, info.value.problem
