"""One container of a pod manifest, checked as the API server checks it, with its defaulting.

Owns: a container's name, image, restart policy (sidecars), resources (a limit without a
request becomes the request; hugepages need the two equal), command and args, env (values and
references), volume mounts, ports and `privileged`; and the resource list grammar the pod-level
fields share (`resource_list`). Every error names the document and the field. Must not: read
the pod around it (bridge.kube.pod_manifest) or apply kubelet's rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from bridge.contract import quantity
from bridge.kube.manifest_error import ManifestError
from bridge.kube.manifest_fields import DNS_LABEL, items, mapping, named_items, string, strings
from bridge.kube.pod_spec import ContainerKind, ContainerSpec, EnvVar, ResourceList, VolumeMount

_COMPUTE = frozenset({"cpu", "memory", "ephemeral-storage"})


def container(item: Any, where: str, field: str, regular: bool, volumes: set[str]) -> ContainerSpec:
    """The container at `field`: a regular one, or an init container (a sidecar if it restarts
    Always); `volumes` are the pod's volume names its mounts may use."""
    obj = mapping(item, where, field)
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        raise ManifestError(where, f"{field}.name", "missing")
    if not DNS_LABEL.match(name) or len(name) > 63:
        raise ManifestError(where, f"{field}.name", f"{name!r} is not a DNS label "
                            "(lower-case letters, digits and '-', at most 63)")
    field = f"{field} ({name})"
    image = obj.get("image")
    if not isinstance(image, str) or not image.strip():
        raise ManifestError(where, f"{field}.image", "missing; every container needs an image")
    kind = _kind(obj, where, field, regular)
    requests, limits = _requests_and_limits(obj, where, field)
    security = mapping(obj.get("securityContext") or {}, where, f"{field}.securityContext")
    return ContainerSpec(
        name=name, image=image.strip(), kind=kind,
        command=strings(obj.get("command"), where, f"{field}.command"),
        args=strings(obj.get("args"), where, f"{field}.args"),
        env=_env(obj.get("env"), where, f"{field}.env"),
        mounts=_mounts(obj.get("volumeMounts"), where, f"{field}.volumeMounts", volumes),
        requests=requests, limits=limits,
        termination_message_path=string(obj.get("terminationMessagePath") or
                                        "/dev/termination-log", where,
                                        f"{field}.terminationMessagePath"),
        termination_message_policy=string(obj.get("terminationMessagePolicy") or "File", where,
                                          f"{field}.terminationMessagePolicy"),
        ports=_ports(obj.get("ports"), where, f"{field}.ports"),
        privileged=security.get("privileged") is True)


def _kind(obj: Mapping[str, Any], where: str, field: str, regular: bool) -> ContainerKind:
    restart = obj.get("restartPolicy")
    if restart not in (None, "Always"):
        raise ManifestError(where, f"{field}.restartPolicy", f"only Always is allowed, got "
                            f"{restart!r}")
    if regular and restart is not None:
        raise ManifestError(where, f"{field}.restartPolicy", "only init containers may set it")
    return (ContainerKind.REGULAR if regular else
            ContainerKind.SIDECAR if restart == "Always" else ContainerKind.INIT)


def _requests_and_limits(obj: Mapping[str, Any], where: str,
                         field: str) -> tuple[ResourceList, ResourceList]:
    resources = mapping(obj.get("resources") or {}, where, f"{field}.resources")
    limits = resource_list(resources.get("limits"), where, f"{field}.resources.limits")
    requests = dict(resource_list(resources.get("requests"), where,
                                  f"{field}.resources.requests"))
    for res, limit in limits:
        requests.setdefault(res, limit)  # the API server's defaulting
        if requests[res] > limit:
            raise ManifestError(where, f"{field}.resources.requests.{res}",
                                f"must be less than or equal to the limit ({limit})")
    for res, req in requests.items():
        if res.startswith("hugepages-") and dict(limits).get(res) != req:
            raise ManifestError(where, f"{field}.resources.limits.{res}", "hugepages need a "
                                "limit equal to the request")
    return tuple(sorted(requests.items())), limits


def resource_list(raw: Any, where: str, field: str) -> ResourceList:
    """A `requests`/`limits`/`overhead` map: known resource names, non-negative quantities."""
    if raw is None:
        return ()
    obj = mapping(raw, where, field)
    out: list[tuple[str, Fraction]] = []
    for name, value in obj.items():
        if not isinstance(name, str) or not (name in _COMPUTE or name.startswith("hugepages-")
                                             or "/" in name):
            raise ManifestError(where, f"{field}.{name}", "unknown resource (cpu, memory, "
                                "ephemeral-storage, hugepages-<size>, or domain/name)")
        if name.startswith("hugepages-"):
            try:
                quantity.parse_quantity(name.removeprefix("hugepages-"))
            except quantity.QuantityError:
                raise ManifestError(where, f"{field}.{name}", "bad hugepage size") from None
        try:
            amount = quantity.parse_quantity(value)
        except quantity.QuantityError as exc:
            raise ManifestError(where, f"{field}.{name}", str(exc)) from None
        if amount < 0:
            raise ManifestError(where, f"{field}.{name}", f"must not be negative, got {value!r}")
        out.append((name, amount))
    return tuple(sorted(out))


def _env(raw: Any, where: str, field: str) -> tuple[EnvVar, ...]:
    out = []
    for name, obj, at in named_items(raw, where, field):
        source = obj.get("valueFrom")
        if source is None:
            value = obj.get("value", "")
            out.append(EnvVar(name, "" if value is None else str(value)))
            continue
        src = mapping(source, where, f"{at}.valueFrom")
        if len(src) != 1:
            raise ManifestError(where, f"{at}.valueFrom", "needs exactly one source")
        kind, ref = next(iter(src.items()))
        ref = mapping(ref, where, f"{at}.valueFrom.{kind}")
        if kind == "fieldRef":
            out.append(EnvVar(name, None, (kind, str(ref.get("fieldPath", "")), "")))
        elif kind == "resourceFieldRef":
            out.append(EnvVar(name, None, (kind, str(ref.get("resource", "")),
                                           str(ref.get("divisor", "1")))))
        elif kind in ("secretKeyRef", "configMapKeyRef"):
            out.append(EnvVar(name, None, (kind, str(ref.get("name", "")),
                                           str(ref.get("key", "")))))
        else:
            raise ManifestError(where, f"{at}.valueFrom.{kind}", "unknown source")
    return tuple(out)


def _mounts(raw: Any, where: str, field: str, volumes: set[str]) -> tuple[VolumeMount, ...]:
    out = []
    for i, item in enumerate(items(raw, where, field)):
        obj = mapping(item, where, f"{field}[{i}]")
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


def _ports(raw: Any, where: str, field: str) -> tuple[tuple[str, int, str], ...]:
    out = []
    for i, item in enumerate(items(raw, where, field)):
        obj = mapping(item, where, f"{field}[{i}]")
        port = obj.get("containerPort")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            raise ManifestError(where, f"{field}[{i}].containerPort", f"expected 1-65535, got "
                                f"{port!r}")
        out.append((str(obj.get("name") or ""), port, str(obj.get("protocol") or "TCP")))
    return tuple(out)
