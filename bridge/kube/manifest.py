"""Kubernetes manifests in, pods out: the documents `try` and the test kit read.

Owns: reading YAML/JSON (multi-document, `-` for stdin), finding the pods in them (Pod, the
pod templates of Deployment, ReplicaSet, ReplicationController, StatefulSet, DaemonSet, Job and
CronJob, one pod per replica, `kind: List` and `kubectl get -o yaml` output; documents of other
kinds make no pod and are skipped with a note, or refused when strict), the validation the API
server would do on what kubelet reads (apiVersion per kind, names, images, quantities,
hugepages, pod-level resources), and its defaulting and admission (a limit without a request
becomes the request, at container and pod level; the ServiceAccount admission's token volume;
the Priority admission's value for the system priority classes; a RuntimeClass's handler; a
StatefulSet's claims). Every error names the document and the field. Must not: apply kubelet's
rules (bridge.kube.kubelet) or touch the network.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml

from bridge import strict_yaml
from bridge.contract import quantity
from bridge.kube.manifest_error import ManifestError
from bridge.kube.metadata_rules import check_annotations, check_labels
from bridge.kube.pod_spec import (
    Container,
    ContainerKind,
    EnvVar,
    Pod,
    ResourceList,
    Volume,
    VolumeMount,
)

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
# What the Priority admission plugin fills in for the built-in classes when `spec.priority`
# is not given (scheduling.SystemNodeCritical / SystemClusterCritical). Other classes are
# cluster objects `try` does not have: their pods get 0, as with no class.
SYSTEM_PRIORITY_CLASSES = {"system-node-critical": 2_000_001_000,
                           "system-cluster-critical": 2_000_000_000}
# Pod-level resources (`spec.resources`): the resources kubelet reads from them.
POD_LEVEL_RESOURCES = ("cpu", "memory")
# The projected volume the ServiceAccount admission plugin adds (name kube-api-access-<5>).
TOKEN_MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
# Pod UIDs that the manifest does not give are derived from namespace/name (stable output).
UID_NAMESPACE = uuid.UUID("6ba7b811-9dad-11d1-80b4-00c04fd430c8")  # RFC 4122 URL namespace
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_COMPUTE = frozenset({"cpu", "memory", "ephemeral-storage"})
_VOLUME_KINDS = ("emptyDir", "hostPath", "configMap", "secret", "projected", "downwardAPI",
                 "persistentVolumeClaim", "csi", "ephemeral", "nfs", "image")


def read_documents(paths: Sequence[str]) -> Iterator[tuple[str, Any]]:
    """(label, parsed document) for every document in `paths` (`-` is stdin)."""
    for path in paths:
        if path == "-":
            text, name = sys.stdin.read(), "<stdin>"
        else:
            try:
                text = Path(path).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise ManifestError(path, "", f"cannot read: {exc}") from None
            name = path
        yield from parse_documents(text, name)


def parse_documents(text: str, name: str) -> Iterator[tuple[str, Any]]:
    """The documents of one YAML or JSON text; empty documents are skipped."""
    try:
        docs = strict_yaml.load_all(text, name)
    except yaml.YAMLError as exc:  # kubectl refuses a key given twice too
        raise ManifestError(name, "", f"not YAML or JSON: {strict_yaml.one_line(exc)}") from None
    for index, doc in enumerate(docs, start=1):
        if doc is not None:
            yield (name if len(docs) == 1 else f"{name} document {index}"), doc


@dataclass(frozen=True, slots=True)
class Manifests:
    """What the manifests describe: the pods, and a note per document that makes none."""

    pods: tuple[Pod, ...]
    skipped: tuple[str, ...] = ()


def read_manifests(paths: Sequence[str], *, strict: bool = False,
                   replicas: int | None = None) -> Manifests:
    """Every pod in the manifests, in order; the first bad document raises ManifestError.

    A document of a kind that makes no pod (a Service, a ConfigMap, a custom resource) is
    skipped with a note, or, `strict`, refused. `replicas` overrides every replicated
    workload's `spec.replicas`. A RuntimeClass in the manifests gives its handler to the pods
    that name it."""
    return manifests_from(read_documents(paths), strict=strict, replicas=replicas)


def manifests_from(documents: Iterable[tuple[str, Any]], *, strict: bool = False,
                   replicas: int | None = None) -> Manifests:
    """`read_manifests` of documents already parsed: (label for messages, document)."""
    docs = list(documents)
    handlers = _runtime_handlers(docs)
    skipped: list[str] | None = None if strict else []
    pods: list[Pod] = []
    for where, doc in docs:
        for pod in pods_of(doc, where, replicas=replicas, skipped=skipped):
            handler = handlers.get(pod.runtime_handler)
            pods.append(replace(pod, runtime_handler=handler) if handler else pod)
    return Manifests(tuple(pods), tuple(skipped or ()))


def load_pods(paths: Sequence[str], *, strict: bool = False,
              replicas: int | None = None) -> list[Pod]:
    """The pods of `read_manifests`."""
    return list(read_manifests(paths, strict=strict, replicas=replicas).pods)


def pods_of(doc: Any, where: str, *, replicas: int | None = None,
            skipped: list[str] | None = None) -> list[Pod]:
    """The pods one document describes (a List may describe several, a workload one per
    replica). A document that makes no pod raises ManifestError, or, given `skipped`, adds a
    note to it and gives no pod."""
    obj = _mapping(doc, where, "")
    kind = obj.get("kind")
    if not isinstance(kind, str) or not kind:
        raise ManifestError(where, "kind", "missing; expected one of " + ", ".join(KINDS))
    _check_api_version(obj, kind, where)
    if kind in LIST_KINDS:
        items = obj.get("items") or []
        if not isinstance(items, list):
            raise ManifestError(where, "items", "must be a list")
        out: list[Pod] = []
        for i, item in enumerate(items):
            out.extend(pods_of(item, f"{where} items[{i}]", replicas=replicas,
                               skipped=skipped))
        return out
    if kind != "Pod" and kind not in TEMPLATE_PATHS:
        problem = f"a {kind} makes no pod; expected one of " + ", ".join(KINDS)
        if skipped is None:
            raise ManifestError(_label(obj, where, kind), "kind", problem)
        skipped.append(f"{_label(obj, where, kind)}: skipped, {problem}")
        return []
    name = _name(obj, where)
    label = f"{where} ({kind} {name})"
    metadata = _mapping(obj.get("metadata") or {}, label, "metadata")
    namespace = _str(metadata.get("namespace") or "default", label, "metadata.namespace")
    if kind == "Pod":
        return [_pod(obj, label, name, namespace, {})]
    path = TEMPLATE_PATHS[kind]
    _mapping(obj.get("spec"), label, "spec")
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
        pod = _pod(template, label, pod_name, namespace, extra, prefix=prefix,
                   claims={c: f"{c}-{name}-{ordinal}" for c in claims})
        out.append(pod)
    if not out and skipped is not None:
        skipped.append(f"{label}: skipped, spec.replicas is 0")
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
    for i, item in enumerate(_list(obj["spec"].get("volumeClaimTemplates"), where, field)):
        claim = _mapping(item, where, f"{field}[{i}]")
        out.append(_name(claim, where, f"{field}[{i}].metadata.name"))
    return tuple(out)


def _runtime_handlers(docs: Sequence[tuple[str, Any]]) -> dict[str, str]:
    """RuntimeClass name -> its CRI handler, for the RuntimeClasses among the documents."""
    out = {}
    for where, doc in docs:
        if isinstance(doc, Mapping) and doc.get("kind") == "RuntimeClass":
            name = _name(doc, where)
            handler = doc.get("handler")
            out[name] = _str(handler, f"{where} (RuntimeClass {name})", "handler")
    return out


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


def _pod(obj: Mapping[str, Any], where: str, name: str, namespace: str,
         extra_labels: Mapping[str, str], prefix: str = "",
         claims: Mapping[str, str] | None = None) -> Pod:
    metadata = _mapping(obj.get("metadata") or {}, where, f"{prefix}metadata")
    spec = _mapping(obj.get("spec"), where, f"{prefix}spec")
    labels = {**_strings(metadata.get("labels"), where, f"{prefix}metadata.labels"),
              **extra_labels}
    annotations = _strings(metadata.get("annotations"), where, f"{prefix}metadata.annotations")
    check_labels(labels, where, f"{prefix}metadata.labels")
    check_annotations(annotations, where, f"{prefix}metadata.annotations")
    uid = metadata.get("uid") if not prefix else None
    uid = _str(uid, where, "metadata.uid") if uid else str(uuid.uuid5(UID_NAMESPACE,
                                                                      f"{namespace}/{name}"))
    volumes = _volumes(spec.get("volumes"), where, f"{prefix}spec.volumes")
    if claims:
        # The StatefulSet controller gives the pod a volume per claim template, named after
        # it, bound to the claim `<template>-<set>-<ordinal>` (replacing one of that name).
        volumes = [v for v in volumes if v.name not in claims]
        volumes += [Volume(v, "persistentVolumeClaim", claim) for v, claim in claims.items()]
    names = {v.name for v in volumes}
    containers: list[Container] = []
    for key, regular in (("initContainers", False), ("containers", True)):
        items = spec.get(key)
        if items is None and regular:
            raise ManifestError(where, f"{prefix}spec.containers", "missing; a pod needs at "
                                "least one container")
        if items is None:
            continue
        if not isinstance(items, list) or (regular and not items):
            raise ManifestError(where, f"{prefix}spec.{key}", "must be a non-empty list")
        for i, item in enumerate(items):
            containers.append(_container(item, where, f"{prefix}spec.{key}[{i}]", regular,
                                         names))
    seen: set[str] = set()
    for c in containers:
        if c.name in seen:
            raise ManifestError(where, f"{prefix}spec", f"two containers are named {c.name!r}")
        seen.add(c.name)
    automount = spec.get("automountServiceAccountToken", True) is not False
    service_account = _str(spec.get("serviceAccountName") or spec.get("serviceAccount")
                           or "default", where, f"{prefix}spec.serviceAccountName")
    if automount and not any(v.kind == "projected" and v.name.startswith("kube-api-access-")
                             for v in volumes):
        volumes, containers = _add_token_volume(name, namespace, volumes, containers)
    priority_class = _str(spec.get("priorityClassName") or "", where,
                          f"{prefix}spec.priorityClassName")
    priority = spec.get("priority")
    if priority is None:  # the Priority admission plugin resolves the class
        priority = SYSTEM_PRIORITY_CLASSES.get(priority_class, 0)
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise ManifestError(where, f"{prefix}spec.priority", f"expected an integer, got "
                            f"{priority!r}")
    if priority_class in SYSTEM_PRIORITY_CLASSES \
            and priority != SYSTEM_PRIORITY_CLASSES[priority_class]:
        raise ManifestError(where, f"{prefix}spec.priority", f"{priority} does not match "
                            f"{priority_class} ({SYSTEM_PRIORITY_CLASSES[priority_class]}); "
                            "leave it out and the Priority admission fills it in")
    pod_requests, pod_limits = _pod_level(spec.get("resources"), where,
                                          f"{prefix}spec.resources")
    runtime_class = _str(spec.get("runtimeClassName") or "", where,
                         f"{prefix}spec.runtimeClassName")
    grace = spec.get("terminationGracePeriodSeconds", 30)
    if isinstance(grace, bool) or not isinstance(grace, int) or grace < 0:
        raise ManifestError(where, f"{prefix}spec.terminationGracePeriodSeconds",
                            f"expected a non-negative integer, got {grace!r}")
    source = annotations.get("kubernetes.io/config.source", "api")
    return Pod(
        source=where, name=name, namespace=namespace, uid=uid,
        labels=tuple(sorted(labels.items())), annotations=tuple(sorted(annotations.items())),
        containers=tuple(containers), volumes=tuple(volumes),
        overhead=_resources(spec.get("overhead"), where, f"{prefix}spec.overhead"),
        pod_requests=pod_requests, pod_limits=pod_limits, runtime_handler=runtime_class,
        service_account=service_account, automount_token=automount,
        host_network=spec.get("hostNetwork") is True, host_pid=spec.get("hostPID") is True,
        host_ipc=spec.get("hostIPC") is True,
        share_process_namespace=spec.get("shareProcessNamespace") is True,
        hostname=_str(spec.get("hostname") or "", where, f"{prefix}spec.hostname"),
        priority=priority, priority_class=priority_class,
        termination_grace_s=grace, enable_service_links=spec.get("enableServiceLinks") is not False,
        static=source != "api")


def _pod_level(raw: Any, where: str, field: str) -> tuple[ResourceList, ResourceList]:
    """Pod-level (requests, limits), the API server's defaulting applied: a pod-level limit
    without a pod-level request becomes the request."""
    obj = _mapping(raw or {}, where, field)
    limits = _resources(obj.get("limits"), where, f"{field}.limits")
    requests = dict(_resources(obj.get("requests"), where, f"{field}.requests"))
    for key, items in (("requests", requests.items()), ("limits", limits)):
        for res, _ in items:
            if res not in POD_LEVEL_RESOURCES:
                raise ManifestError(where, f"{field}.{key}.{res}", "pod-level resources: "
                                    "only cpu and memory are supported by try")
    for res, limit in limits:
        requests.setdefault(res, limit)
        if requests[res] > limit:
            raise ManifestError(where, f"{field}.requests.{res}",
                                f"must be less than or equal to the limit ({limit})")
    return tuple(sorted(requests.items())), limits


def _add_token_volume(name: str, namespace: str, volumes: Sequence[Volume],
                      containers: Sequence[Container]) -> tuple[list[Volume], list[Container]]:
    """What the ServiceAccount admission plugin adds to a pod created through the API."""
    digest = hashlib.sha256(f"{namespace}/{name}".encode()).hexdigest()
    volume = Volume("kube-api-access-" + "".join("bcdfghjklmnpqrstvwxz2456789"[int(c, 16)]
                                                 for c in digest[:5]), "projected")
    mount = VolumeMount(volume.name, TOKEN_MOUNT_PATH, read_only=True)
    out = []
    for c in containers:
        if any(m.mount_path == TOKEN_MOUNT_PATH for m in c.mounts):
            out.append(c)
        else:
            out.append(replace(c, mounts=(*c.mounts, mount)))
    return [*volumes, volume], out


def _container(item: Any, where: str, field: str, regular: bool, volumes: set[str]) -> Container:
    obj = _mapping(item, where, field)
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        raise ManifestError(where, f"{field}.name", "missing")
    if not _DNS_LABEL.match(name) or len(name) > 63:
        raise ManifestError(where, f"{field}.name", f"{name!r} is not a DNS label "
                            "(lower-case letters, digits and '-', at most 63)")
    field = f"{field} ({name})"
    image = obj.get("image")
    if not isinstance(image, str) or not image.strip():
        raise ManifestError(where, f"{field}.image", "missing; every container needs an image")
    restart = obj.get("restartPolicy")
    if restart not in (None, "Always"):
        raise ManifestError(where, f"{field}.restartPolicy", f"only Always is allowed, got "
                            f"{restart!r}")
    if regular and restart is not None:
        raise ManifestError(where, f"{field}.restartPolicy", "only init containers may set it")
    kind = (ContainerKind.REGULAR if regular else
            ContainerKind.SIDECAR if restart == "Always" else ContainerKind.INIT)
    resources = _mapping(obj.get("resources") or {}, where, f"{field}.resources")
    limits = _resources(resources.get("limits"), where, f"{field}.resources.limits")
    requests = dict(_resources(resources.get("requests"), where, f"{field}.resources.requests"))
    for res, limit in limits:
        requests.setdefault(res, limit)  # the API server's defaulting
        if requests[res] > limit:
            raise ManifestError(where, f"{field}.resources.requests.{res}",
                                f"must be less than or equal to the limit ({limit})")
    for res, req in requests.items():
        if res.startswith("hugepages-") and dict(limits).get(res) != req:
            raise ManifestError(where, f"{field}.resources.limits.{res}", "hugepages need a "
                                "limit equal to the request")
    security = _mapping(obj.get("securityContext") or {}, where, f"{field}.securityContext")
    return Container(
        name=name, image=image.strip(), kind=kind,
        command=_str_list(obj.get("command"), where, f"{field}.command"),
        args=_str_list(obj.get("args"), where, f"{field}.args"),
        env=_env(obj.get("env"), where, f"{field}.env"),
        mounts=_mounts(obj.get("volumeMounts"), where, f"{field}.volumeMounts", volumes),
        requests=tuple(sorted(requests.items())), limits=limits,
        termination_message_path=_str(obj.get("terminationMessagePath") or
                                      "/dev/termination-log", where,
                                      f"{field}.terminationMessagePath"),
        termination_message_policy=_str(obj.get("terminationMessagePolicy") or "File", where,
                                        f"{field}.terminationMessagePolicy"),
        ports=_ports(obj.get("ports"), where, f"{field}.ports"),
        privileged=security.get("privileged") is True)


def _resources(raw: Any, where: str, field: str) -> ResourceList:
    if raw is None:
        return ()
    obj = _mapping(raw, where, field)
    out: list[tuple[str, Fraction]] = []
    for name, value in obj.items():
        if not isinstance(name, str) or not (name in _COMPUTE or name.startswith("hugepages-")
                                             or "/" in name):
            raise ManifestError(where, f"{field}.{name}", "unknown resource (cpu, memory, "
                                "ephemeral-storage, hugepages-<size>, or domain/name)")
        if name.startswith("hugepages-"):
            try:
                quantity.parse(name.removeprefix("hugepages-"))
            except quantity.QuantityError:
                raise ManifestError(where, f"{field}.{name}", "bad hugepage size") from None
        try:
            amount = quantity.parse(value)
        except quantity.QuantityError as exc:
            raise ManifestError(where, f"{field}.{name}", str(exc)) from None
        if amount < 0:
            raise ManifestError(where, f"{field}.{name}", f"must not be negative, got {value!r}")
        out.append((name, amount))
    return tuple(sorted(out))


def _env(raw: Any, where: str, field: str) -> tuple[EnvVar, ...]:
    out = []
    for i, item in enumerate(_list(raw, where, field)):
        obj = _mapping(item, where, f"{field}[{i}]")
        name = obj.get("name")
        if not isinstance(name, str) or not name:
            raise ManifestError(where, f"{field}[{i}].name", "missing")
        source = obj.get("valueFrom")
        if source is None:
            value = obj.get("value", "")
            out.append(EnvVar(name, "" if value is None else str(value)))
            continue
        src = _mapping(source, where, f"{field}[{i}].valueFrom")
        if len(src) != 1:
            raise ManifestError(where, f"{field}[{i}].valueFrom", "needs exactly one source")
        kind, ref = next(iter(src.items()))
        ref = _mapping(ref, where, f"{field}[{i}].valueFrom.{kind}")
        if kind == "fieldRef":
            out.append(EnvVar(name, None, (kind, str(ref.get("fieldPath", "")), "")))
        elif kind == "resourceFieldRef":
            out.append(EnvVar(name, None, (kind, str(ref.get("resource", "")),
                                           str(ref.get("divisor", "1")))))
        elif kind in ("secretKeyRef", "configMapKeyRef"):
            out.append(EnvVar(name, None, (kind, str(ref.get("name", "")),
                                           str(ref.get("key", "")))))
        else:
            raise ManifestError(where, f"{field}[{i}].valueFrom.{kind}", "unknown source")
    return tuple(out)


def _mounts(raw: Any, where: str, field: str, volumes: set[str]) -> tuple[VolumeMount, ...]:
    out = []
    for i, item in enumerate(_list(raw, where, field)):
        obj = _mapping(item, where, f"{field}[{i}]")
        name, path = obj.get("name"), obj.get("mountPath")
        if not isinstance(name, str) or name not in volumes:
            raise ManifestError(where, f"{field}[{i}].name", f"no volume named {name!r} in "
                                "spec.volumes")
        if not isinstance(path, str) or not path.startswith("/"):
            raise ManifestError(where, f"{field}[{i}].mountPath", "must be an absolute path")
        propagation = obj.get("mountPropagation") or "None"
        if propagation not in ("None", "HostToContainer", "Bidirectional"):
            raise ManifestError(where, f"{field}[{i}].mountPropagation",
                                f"unknown value {propagation!r}")
        out.append(VolumeMount(name, path, obj.get("readOnly") is True,
                               str(obj.get("subPath") or ""), propagation))
    return tuple(out)


def _volumes(raw: Any, where: str, field: str) -> list[Volume]:
    out = []
    for i, item in enumerate(_list(raw, where, field)):
        obj = _mapping(item, where, f"{field}[{i}]")
        name = obj.get("name")
        if not isinstance(name, str) or not name:
            raise ManifestError(where, f"{field}[{i}].name", "missing")
        kind = next((k for k in _VOLUME_KINDS if k in obj), None)
        if kind is None:
            kind = next((k for k in obj if k != "name"), "emptyDir")
        detail = obj.get(kind) or {}
        path = ""
        if kind == "hostPath":
            path = _str(detail.get("path") if isinstance(detail, Mapping) else None, where,
                        f"{field}[{i}].hostPath.path")
        elif kind == "persistentVolumeClaim" and isinstance(detail, Mapping):
            path = str(detail.get("claimName", ""))
        out.append(Volume(name, kind, path))
    return out


def _ports(raw: Any, where: str, field: str) -> tuple[tuple[str, int, str], ...]:
    out = []
    for i, item in enumerate(_list(raw, where, field)):
        obj = _mapping(item, where, f"{field}[{i}]")
        port = obj.get("containerPort")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            raise ManifestError(where, f"{field}[{i}].containerPort", f"expected 1-65535, got "
                                f"{port!r}")
        out.append((str(obj.get("name") or ""), port, str(obj.get("protocol") or "TCP")))
    return tuple(out)


# -- small checked accessors ---------------------------------------------------------------


def _name(obj: Mapping[str, Any], where: str, field: str = "metadata.name") -> str:
    metadata = obj.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    if not isinstance(name, str) or not name:
        raise ManifestError(where, field, "missing")
    if not _DNS_SUBDOMAIN.match(name) or len(name) > 253:
        raise ManifestError(where, field, f"{name!r} is not a DNS subdomain name")
    return name


def _mapping(value: Any, where: str, field: str) -> Mapping[str, Any]:
    if value is None and field:
        raise ManifestError(where, field, "missing")
    if not isinstance(value, Mapping):
        raise ManifestError(where, field or "document", f"expected a mapping, got "
                            f"{type(value).__name__}")
    return value


def _list(value: Any, where: str, field: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ManifestError(where, field, f"expected a list, got {type(value).__name__}")
    return value


def _str(value: Any, where: str, field: str) -> str:
    if not isinstance(value, str):
        raise ManifestError(where, field, f"expected a string, got {value!r}")
    return value


def _strings(value: Any, where: str, field: str) -> dict[str, str]:
    if value is None:
        return {}
    obj = _mapping(value, where, field)
    out = {}
    for k, v in obj.items():
        if not isinstance(v, str):
            raise ManifestError(where, f"{field}.{k}", f"expected a string value, got {v!r}")
        out[str(k)] = v
    return out


def _str_list(value: Any, where: str, field: str) -> tuple[str, ...]:
    items = _list(value, where, field)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise ManifestError(where, f"{field}[{i}]", f"expected a string, got {item!r}")
    return tuple(items)
