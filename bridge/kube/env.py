"""Container environment as kubelet builds it: the container's env, then the service vars.

Owns: resolving `valueFrom` (fieldRef, resourceFieldRef; secrets and config maps become
visible placeholders because `try` has no cluster), `$(VAR)` expansion, and the `kubernetes`
service's variables kubelet adds to every container. Must not: decide mounts or resources.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from fractions import Fraction

from bridge.contract import quantity
from bridge.kube.manifest_error import ManifestError
from bridge.kube.node import NodeSpec
from bridge.kube.pod_spec import ContainerSpec, PodSpec, amount

# The cluster-specific values `try` cannot know, chosen as kubeadm's defaults.
SERVICE_HOST = "10.96.0.1"  # first address of kubeadm's default service CIDR
NODE_IP = "10.0.0.10"
POD_IP = "10.244.0.10"  # first pod address of kubeadm's default pod CIDR (flannel)
_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def service_env() -> tuple[tuple[str, str], ...]:
    """The `kubernetes` service's variables (always added, enableServiceLinks or not)."""
    host, port = SERVICE_HOST, "443"
    url = f"tcp://{host}:{port}"
    return (("KUBERNETES_SERVICE_HOST", host), ("KUBERNETES_SERVICE_PORT", port),
            ("KUBERNETES_SERVICE_PORT_HTTPS", port), ("KUBERNETES_PORT", url),
            (f"KUBERNETES_PORT_{port}_TCP", url), (f"KUBERNETES_PORT_{port}_TCP_PROTO", "tcp"),
            (f"KUBERNETES_PORT_{port}_TCP_PORT", port),
            (f"KUBERNETES_PORT_{port}_TCP_ADDR", host))


def container_env(pod: PodSpec, container: ContainerSpec, node: NodeSpec,
                  field: str) -> tuple[tuple[str, str], ...]:
    services = dict(service_env())
    own: dict[str, str] = {}
    for var in container.env:
        if var.value_from is None:
            value = expand(var.value or "", own, services)
        else:
            value = _resolve(pod, container, node, var.value_from, f"{field}.env.{var.name}")
        own[var.name] = value  # a later entry with the same name wins, in the first's place
    return (*own.items(), *((k, v) for k, v in services.items() if k not in own))


def expand(text: str, own: Mapping[str, str], services: Mapping[str, str]) -> str:
    """`$(NAME)` -> its value when defined earlier (else left as is); `$$` -> `$`."""
    def sub(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return own.get(name, services.get(name, match.group(0)))

    return _VAR.sub(sub, text)


def _resolve(pod: PodSpec, container: ContainerSpec, node: NodeSpec, source: tuple[str, str, str],
             field: str) -> str:
    kind, ref, detail = source
    if kind == "fieldRef":
        return _field(pod, node, ref, field)
    if kind == "resourceFieldRef":
        return _resource(pod.source, container, node, ref, detail, field)
    what = "secret" if kind == "secretKeyRef" else "configmap"
    return f"<{what} {pod.namespace}/{ref} key {detail}>"


def _field(pod: PodSpec, node: NodeSpec, path: str, field: str) -> str:
    simple = {"metadata.name": pod.name, "metadata.namespace": pod.namespace,
              "metadata.uid": pod.uid, "spec.nodeName": node.name,
              "spec.serviceAccountName": pod.service_account, "status.hostIP": NODE_IP,
              "status.hostIPs": NODE_IP,
              "status.podIP": NODE_IP if pod.host_network else POD_IP,
              "status.podIPs": NODE_IP if pod.host_network else POD_IP}
    if path in simple:
        return simple[path]
    match = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path)
    if match:
        return dict(pod.labels if match.group(1) == "labels" else pod.annotations).get(
            match.group(2), "")
    raise ManifestError(pod.source, f"{field}.valueFrom.fieldRef.fieldPath",
                        f"unsupported field path {path!r}")


def _resource(where: str, container: ContainerSpec, node: NodeSpec, resource: str, divisor: str,
              field: str) -> str:
    side, _, name = resource.partition(".")
    if side not in ("limits", "requests") or not name:
        raise ManifestError(where, f"{field}.valueFrom.resourceFieldRef.resource",
                            f"expected limits.<name> or requests.<name>, got {resource!r}")
    key = f"{field}.valueFrom.resourceFieldRef.divisor"
    try:
        div = quantity.parse_quantity(divisor or "1")
    except quantity.QuantityError as exc:
        raise ManifestError(where, key, str(exc)) from None
    if div <= 0:
        raise ManifestError(where, key, "must be > 0")
    value = amount(container.limits if side == "limits" else container.requests, name)
    if value is None and side == "limits":
        # No limit: the node's allocatable capacity stands in for it.
        capacity = {"cpu": node.cpus, "memory": node.memory_bytes}.get(name)
        value = Fraction(capacity) if capacity is not None else None
    return str(math.ceil((value or Fraction(0)) / div))
