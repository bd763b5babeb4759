"""What the API server's admission plugins add to a pod created through the API.

Owns: the ServiceAccount admission (the service account's name, and the projected token volume
`kube-api-access-<5>` mounted in every container) and the Priority admission (the value of the
built-in system priority classes, checked against a given `spec.priority`). Must not: read the
rest of the pod (bridge.kube.pod_manifest) or know of cluster objects `try` does not have.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from bridge.kube.manifest_error import ManifestError
from bridge.kube.manifest_fields import string
from bridge.kube.pod_spec import ContainerSpec, Volume, VolumeMount

# What the Priority admission plugin fills in for the built-in classes when `spec.priority`
# is not given (scheduling.SystemNodeCritical / SystemClusterCritical). Other classes are
# cluster objects `try` does not have: their pods get 0, as with no class.
SYSTEM_PRIORITY_CLASSES = {"system-node-critical": 2_000_001_000,
                           "system-cluster-critical": 2_000_000_000}
# The projected volume the ServiceAccount admission plugin adds (name kube-api-access-<5>).
TOKEN_MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"


def service_account(spec: Mapping[str, Any], name: str, namespace: str,
                    volumes: list[Volume], containers: list[ContainerSpec], where: str,
                    prefix: str) -> tuple[str, bool, list[Volume], list[ContainerSpec]]:
    """(service account, automount, volumes, containers) after the ServiceAccount admission."""
    automount = spec.get("automountServiceAccountToken", True) is not False
    account = string(spec.get("serviceAccountName") or spec.get("serviceAccount")
                     or "default", where, f"{prefix}spec.serviceAccountName")
    if automount and not any(v.kind == "projected" and v.name.startswith("kube-api-access-")
                             for v in volumes):
        volumes, containers = _add_token_volume(name, namespace, volumes, containers)
    return account, automount, volumes, containers


def _add_token_volume(name: str, namespace: str, volumes: Sequence[Volume],
                      containers: Sequence[ContainerSpec],
                      ) -> tuple[list[Volume], list[ContainerSpec]]:
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


def priority(spec: Mapping[str, Any], where: str, prefix: str) -> tuple[str, int]:
    """(priority class, priority) after the Priority admission."""
    priority_class = string(spec.get("priorityClassName") or "", where,
                            f"{prefix}spec.priorityClassName")
    value = spec.get("priority")
    if value is None:  # the Priority admission plugin resolves the class
        value = SYSTEM_PRIORITY_CLASSES.get(priority_class, 0)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ManifestError(where, f"{prefix}spec.priority", f"expected an integer, got "
                            f"{value!r}")
    if priority_class in SYSTEM_PRIORITY_CLASSES \
            and value != SYSTEM_PRIORITY_CLASSES[priority_class]:
        raise ManifestError(where, f"{prefix}spec.priority", f"{value} does not match "
                            f"{priority_class} ({SYSTEM_PRIORITY_CLASSES[priority_class]}); "
                            "leave it out and the Priority admission fills it in")
    return priority_class, value
