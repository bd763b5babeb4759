"""The pods one manifest document describes: a Pod, a workload's pods, a List's items.

Owns: which kinds make pods (Pod, the pod templates of Deployment, ReplicaSet,
ReplicationController, StatefulSet, DaemonSet, Job and CronJob, `kind: List` and `kubectl get
-o yaml` output), the apiVersion each kind is served under, one pod per replica, and what a
workload's controller gives its pods (their names, the labels it adds, a StatefulSet's volume
claims). Documents of other kinds make no pod: skipped with a note, or refused when strict.
Must not: check a pod's own fields (bridge.kube.pod_manifest).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from bridge.kube.manifest_error import ManifestError
from bridge.kube.manifest_fields import items, mapping, object_name, string
from bridge.kube.pod_manifest import pod
from bridge.kube.pod_spec import PodSpec

# kind -> path to the pod template inside the object
TEMPLATE_PATHS: dict[str, tuple[str, ...]] = {
    "Deployment": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "ReplicationController": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}
# Workloads whose `spec.replicas` (default 1) is the number of pods they run.
REPLICATED_KINDS = frozenset({"Deployment", "ReplicaSet", "ReplicationController",
                              "StatefulSet"})
LIST_KINDS = frozenset({"List", "PodList"})
KINDS = ("Pod", *TEMPLATE_PATHS, *sorted(LIST_KINDS))
# The apiVersion each kind is served under (the older beta groups were removed: apps/v1beta*
# in 1.16, batch/v1beta1 CronJob in 1.25). A document without apiVersion is taken as these.
API_VERSIONS: dict[str, str] = {
    "Pod": "v1", "ReplicationController": "v1", "List": "v1", "PodList": "v1",
    "Deployment": "apps/v1", "ReplicaSet": "apps/v1", "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1", "Job": "batch/v1", "CronJob": "batch/v1",
    "RuntimeClass": "node.k8s.io/v1",
}


def pods_of(doc: Any, where: str, *, replicas: int | None = None,
            skipped: list[str] | None = None) -> list[PodSpec]:
    """The pods one document describes (a List may describe several, a workload one per
    replica). A document that makes no pod raises ManifestError, or, given `skipped`, adds a
    note to it and gives no pod."""
    obj = mapping(doc, where, "")
    kind = obj.get("kind")
    if not isinstance(kind, str) or not kind:
        raise ManifestError(where, "kind", "missing; expected one of " + ", ".join(KINDS))
    _check_api_version(obj, kind, where)
    if kind in LIST_KINDS:
        listed = obj.get("items") or []
        if not isinstance(listed, list):
            raise ManifestError(where, "items", "must be a list")
        out: list[PodSpec] = []
        for i, item in enumerate(listed):
            out.extend(pods_of(item, f"{where} items[{i}]", replicas=replicas,
                               skipped=skipped))
        return out
    if kind != "Pod" and kind not in TEMPLATE_PATHS:
        problem = f"a {kind} makes no pod; expected one of " + ", ".join(KINDS)
        if skipped is None:
            raise ManifestError(_label(obj, where, kind), "kind", problem)
        skipped.append(f"{_label(obj, where, kind)}: skipped, {problem}")
        return []
    name = object_name(obj, where)
    label = f"{where} ({kind} {name})"
    metadata = mapping(obj.get("metadata") or {}, label, "metadata")
    namespace = string(metadata.get("namespace") or "default", label, "metadata.namespace")
    if kind == "Pod":
        return [pod(obj, label, name, namespace, {})]
    out = _workload_pods(obj, kind, label, name, namespace, replicas)
    if not out and skipped is not None:
        skipped.append(f"{label}: skipped, spec.replicas is 0")
    return out


def _workload_pods(obj: Mapping[str, Any], kind: str, label: str, name: str, namespace: str,
                   replicas: int | None) -> list[PodSpec]:
    path = TEMPLATE_PATHS[kind]
    mapping(obj.get("spec"), label, "spec")
    template: Any = obj
    for step in path:
        template = template.get(step) if isinstance(template, Mapping) else None
    if not isinstance(template, Mapping):
        raise ManifestError(label, ".".join(path), "missing pod template")
    prefix = ".".join(path) + "."
    claims = _claim_templates(obj, label) if kind == "StatefulSet" else ()
    out = []
    for ordinal in range(_replicas(obj, kind, label, replicas)):
        pod_name, extra = _workload_pod(kind, name, template, ordinal)
        out.append(pod(template, label, pod_name, namespace, extra, prefix=prefix,
                       claims={c: f"{c}-{name}-{ordinal}" for c in claims}))
    return out


def _label(obj: Mapping[str, Any], where: str, kind: str) -> str:
    metadata = obj.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    return f"{where} ({kind} {name})" if isinstance(name, str) and name else where


def _check_api_version(obj: Mapping[str, Any], kind: str, where: str) -> None:
    expected = API_VERSIONS.get(kind)
    given = obj.get("apiVersion")
    if expected is None or given is None or given == expected:
        return
    raise ManifestError(where, "apiVersion", f"{given!r} does not serve {kind}; expected "
                        f"{expected!r}")


def _replicas(obj: Mapping[str, Any], kind: str, where: str, override: int | None) -> int:
    if kind not in REPLICATED_KINDS:
        return 1  # a DaemonSet runs one pod per node; a Job's pods are played as one
    if override is not None:
        return override
    count = obj["spec"].get("replicas", 1)
    if count is None:
        return 1
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ManifestError(where, "spec.replicas", f"expected a non-negative integer, got "
                            f"{count!r}")
    return count


def _claim_templates(obj: Mapping[str, Any], where: str) -> tuple[str, ...]:
    """The names of a StatefulSet's volumeClaimTemplates: each becomes a pod volume."""
    out = []
    field = "spec.volumeClaimTemplates"
    for i, item in enumerate(items(obj["spec"].get("volumeClaimTemplates"), where, field)):
        claim = mapping(item, where, f"{field}[{i}]")
        out.append(object_name(claim, where, f"{field}[{i}].metadata.name"))
    return tuple(out)


def _workload_pod(kind: str, name: str, template: Mapping[str, Any],
                  ordinal: int) -> tuple[str, dict[str, str]]:
    """The name a controller gives its pod number `ordinal`, and the labels it adds."""
    digest = hashlib.sha256(json.dumps(template, sort_keys=True, default=str).encode()).hexdigest()
    # Controllers name pods with five random characters; ours are derived from the template
    # and the ordinal, so every run names them alike.
    salted = digest if ordinal == 0 else hashlib.sha256(f"{digest}/{ordinal}".encode()).hexdigest()
    suffix = "".join("bcdfghjklmnpqrstvwxz2456789"[int(c, 16)] for c in salted[10:15])
    if kind in ("Deployment", "ReplicaSet", "ReplicationController"):
        template_hash = digest[:10] if kind == "Deployment" else ""
        prefix = f"{name}-{template_hash}" if template_hash else name
        return f"{prefix}-{suffix}", ({"pod-template-hash": template_hash}
                                      if template_hash else {})
    if kind == "StatefulSet":
        pod_name = f"{name}-{ordinal}"
        return pod_name, {"statefulset.kubernetes.io/pod-name": pod_name,
                          "apps.kubernetes.io/pod-index": str(ordinal),
                          "controller-revision-hash": f"{name}-{digest[:10]}"}
    if kind == "DaemonSet":
        return f"{name}-{suffix}", {"controller-revision-hash": digest[:10],
                                    "pod-template-generation": "1"}
    job = name if kind == "Job" else f"{name}-29000000"  # CronJob: <name>-<scheduled minute>
    return f"{job}-{suffix}", {"job-name": job, "batch.kubernetes.io/job-name": job}
