"""Kubernetes manifests in, pods out: the entry point `try` and the test kit read manifests by.

Owns: `read_manifests` and its relatives, which gather the pods of every document in order
(bridge.kube.documents parses the files, bridge.kube.workloads finds the pods of a document,
bridge.kube.pod_manifest checks each), the skipped-document notes, the `--replicas` override,
and the RuntimeClass admission: a RuntimeClass among the documents gives its handler to the
pods that name it. Must not: apply kubelet's rules (bridge.kube.kubelet) or touch the network.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from bridge.kube.documents import read_manifest_documents
from bridge.kube.manifest_fields import object_name, string
from bridge.kube.pod_spec import PodSpec
from bridge.kube.workloads import pods_of


@dataclass(frozen=True, slots=True)
class Manifests:
    """What the manifests describe: the pods, and a note per document that makes none."""

    pods: tuple[PodSpec, ...]
    skipped: tuple[str, ...] = ()


def read_manifests(paths: Sequence[str], *, strict: bool = False,
                   replicas: int | None = None) -> Manifests:
    """Every pod in the manifests, in order; the first bad document raises ManifestError.

    A document of a kind that makes no pod (a Service, a ConfigMap, a custom resource) is
    skipped with a note, or, `strict`, refused. `replicas` overrides every replicated
    workload's `spec.replicas`. A RuntimeClass in the manifests gives its handler to the pods
    that name it."""
    return manifests_from(read_manifest_documents(paths), strict=strict, replicas=replicas)


def manifests_from(documents: Iterable[tuple[str, Any]], *, strict: bool = False,
                   replicas: int | None = None) -> Manifests:
    """`read_manifests` of documents already parsed: (label for messages, document)."""
    docs = list(documents)
    handlers = _runtime_handlers(docs)
    skipped: list[str] | None = None if strict else []
    pods: list[PodSpec] = []
    for where, doc in docs:
        for pod in pods_of(doc, where, replicas=replicas, skipped=skipped):
            handler = handlers.get(pod.runtime_handler)
            pods.append(replace(pod, runtime_handler=handler) if handler else pod)
    return Manifests(tuple(pods), tuple(skipped or ()))


def load_pods(paths: Sequence[str], *, strict: bool = False,
              replicas: int | None = None) -> list[PodSpec]:
    """The pods of `read_manifests`."""
    return list(read_manifests(paths, strict=strict, replicas=replicas).pods)


def _runtime_handlers(docs: Sequence[tuple[str, Any]]) -> dict[str, str]:
    """RuntimeClass name -> its CRI handler, for the RuntimeClasses among the documents."""
    out = {}
    for where, doc in docs:
        if isinstance(doc, Mapping) and doc.get("kind") == "RuntimeClass":
            name = object_name(doc, where)
            handler = doc.get("handler")
            out[name] = string(handler, f"{where} (RuntimeClass {name})", "handler")
    return out
