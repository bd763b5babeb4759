"""One pod of a manifest (a Pod, or a workload's pod template) checked and defaulted: a `Pod`.

Owns: the pod's metadata (labels and annotations checked, the uid given or derived from
namespace/name), its volumes (a StatefulSet's claims among them), its containers in order (init
then regular, names unique), pod-level resources and overhead, and the scalar spec fields kubelet
reads; the admission plugins' additions come from bridge.kube.admission, each container from
bridge.kube.container_manifest. Every error names the document and the field. Must not: find
pods in a document (bridge.kube.workloads) or apply kubelet's rules (bridge.kube.kubelet).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from bridge.kube import admission
from bridge.kube.container_manifest import container, resource_list
from bridge.kube.manifest_error import ManifestError
from bridge.kube.manifest_fields import mapping, named_items, string, string_map
from bridge.kube.metadata_rules import check_annotations, check_labels
from bridge.kube.pod_spec import ContainerSpec, PodSpec, ResourceList, Volume

# Pod-level resources (`spec.resources`): the resources kubelet reads from them.
POD_LEVEL_RESOURCES = ("cpu", "memory")
# Pod UIDs that the manifest does not give are derived from namespace/name (stable output).
UID_NAMESPACE = uuid.UUID("6ba7b811-9dad-11d1-80b4-00c04fd430c8")  # RFC 4122 URL namespace
_VOLUME_KINDS = ("emptyDir", "hostPath", "configMap", "secret", "projected", "downwardAPI",
                 "persistentVolumeClaim", "csi", "ephemeral", "nfs", "image")


def pod(obj: Mapping[str, Any], where: str, name: str, namespace: str,
        extra_labels: Mapping[str, str], prefix: str = "",
        claims: Mapping[str, str] | None = None) -> PodSpec:
    """The pod `obj` describes; `prefix` is the path of a pod template in its workload,
    `extra_labels` what the workload's controller adds, `claims` a StatefulSet's volume claim
    per template name."""
    metadata = mapping(obj.get("metadata") or {}, where, f"{prefix}metadata")
    spec = mapping(obj.get("spec"), where, f"{prefix}spec")
    labels = {**string_map(metadata.get("labels"), where, f"{prefix}metadata.labels"),
              **extra_labels}
    annotations = string_map(metadata.get("annotations"), where,
                             f"{prefix}metadata.annotations")
    check_labels(labels, where, f"{prefix}metadata.labels")
    check_annotations(annotations, where, f"{prefix}metadata.annotations")
    uid = metadata.get("uid") if not prefix else None
    uid = string(uid, where, "metadata.uid") if uid else str(uuid.uuid5(UID_NAMESPACE,
                                                                        f"{namespace}/{name}"))
    volumes = _volumes(spec.get("volumes"), where, f"{prefix}spec.volumes")
    if claims:
        # The StatefulSet controller gives the pod a volume per claim template, named after
        # it, bound to the claim `<template>-<set>-<ordinal>` (replacing one of that name).
        volumes = [v for v in volumes if v.name not in claims]
        volumes += [Volume(v, "persistentVolumeClaim", claim) for v, claim in claims.items()]
    containers = _containers(spec, where, prefix, {v.name for v in volumes})
    account, automount, volumes, containers = admission.service_account(
        spec, name, namespace, volumes, containers, where, prefix)
    priority_class, priority = admission.priority(spec, where, prefix)
    pod_requests, pod_limits = _pod_level(spec.get("resources"), where,
                                          f"{prefix}spec.resources")
    runtime_class = string(spec.get("runtimeClassName") or "", where,
                           f"{prefix}spec.runtimeClassName")
    grace = spec.get("terminationGracePeriodSeconds", 30)
    if isinstance(grace, bool) or not isinstance(grace, int) or grace < 0:
        raise ManifestError(where, f"{prefix}spec.terminationGracePeriodSeconds",
                            f"expected a non-negative integer, got {grace!r}")
    source = annotations.get("kubernetes.io/config.source", "api")
    return PodSpec(
        source=where, name=name, namespace=namespace, uid=uid,
        labels=tuple(sorted(labels.items())), annotations=tuple(sorted(annotations.items())),
        containers=tuple(containers), volumes=tuple(volumes),
        overhead=resource_list(spec.get("overhead"), where, f"{prefix}spec.overhead"),
        pod_requests=pod_requests, pod_limits=pod_limits, runtime_handler=runtime_class,
        service_account=account, automount_token=automount,
        host_network=spec.get("hostNetwork") is True, host_pid=spec.get("hostPID") is True,
        host_ipc=spec.get("hostIPC") is True,
        share_process_namespace=spec.get("shareProcessNamespace") is True,
        hostname=string(spec.get("hostname") or "", where, f"{prefix}spec.hostname"),
        priority=priority, priority_class=priority_class,
        termination_grace_s=grace, enable_service_links=spec.get("enableServiceLinks") is not False,
        static=source != "api")


def _containers(spec: Mapping[str, Any], where: str, prefix: str,
                volumes: set[str]) -> list[ContainerSpec]:
    """Init containers, then regular ones (at least one), names unique across both."""
    out: list[ContainerSpec] = []
    for key, regular in (("initContainers", False), ("containers", True)):
        listed = spec.get(key)
        if listed is None and regular:
            raise ManifestError(where, f"{prefix}spec.containers", "missing; a pod needs at "
                                "least one container")
        if listed is None:
            continue
        if not isinstance(listed, list) or (regular and not listed):
            raise ManifestError(where, f"{prefix}spec.{key}", "must be a non-empty list")
        for i, item in enumerate(listed):
            out.append(container(item, where, f"{prefix}spec.{key}[{i}]", regular, volumes))
    seen: set[str] = set()
    for c in out:
        if c.name in seen:
            raise ManifestError(where, f"{prefix}spec", f"two containers are named {c.name!r}")
        seen.add(c.name)
    return out


def _pod_level(raw: Any, where: str, field: str) -> tuple[ResourceList, ResourceList]:
    """Pod-level (requests, limits), the API server's defaulting applied: a pod-level limit
    without a pod-level request becomes the request."""
    obj = mapping(raw or {}, where, field)
    limits = resource_list(obj.get("limits"), where, f"{field}.limits")
    requests = dict(resource_list(obj.get("requests"), where, f"{field}.requests"))
    for key, listed in (("requests", requests.items()), ("limits", limits)):
        for res, _ in listed:
            if res not in POD_LEVEL_RESOURCES:
                raise ManifestError(where, f"{field}.{key}.{res}", "pod-level resources: "
                                    "only cpu and memory are supported by try")
    for res, limit in limits:
        requests.setdefault(res, limit)
        if requests[res] > limit:
            raise ManifestError(where, f"{field}.requests.{res}",
                                f"must be less than or equal to the limit ({limit})")
    return tuple(sorted(requests.items())), limits


def _volumes(raw: Any, where: str, field: str) -> list[Volume]:
    out = []
    for name, obj, at in named_items(raw, where, field):
        kind = next((k for k in _VOLUME_KINDS if k in obj), None)
        if kind is None:
            kind = next((k for k in obj if k != "name"), "emptyDir")
        detail = obj.get(kind) or {}
        path = ""
        if kind == "hostPath":
            path = string(detail.get("path") if isinstance(detail, Mapping) else None, where,
                          f"{at}.hostPath.path")
        elif kind == "persistentVolumeClaim" and isinstance(detail, Mapping):
            path = str(detail.get("claimName", ""))
        out.append(Volume(name, kind, path))
    return out
