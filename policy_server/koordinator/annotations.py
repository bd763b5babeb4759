"""Typed parsing of the pod annotations koordinator's hooks read (spec §4, §5).

Each function returns ``None`` when the annotation is absent and raises ``AnnotationError``
(a ``PolicyError``) naming the annotation when it is present but unusable; the hook decides
whether that is a hook error or only a warning, as koordlet does. Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from policy_server.koordinator import keys
from policy_server.koordinator.quantity import quantity_value
from policy_server.sdk import PolicyError, check_cpu_list

# Parsed annotations are cached by their raw text: every container of a pod, and every
# Synchronize / resync, reads the same strings. Values are immutable, errors are not cached.
_CACHE_SIZE = 1024


class AnnotationError(PolicyError):
    """A pod annotation is present but cannot be used."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"annotation {key}: {message}")
        self.key = key


def _load(annotations: Mapping[str, str], key: str) -> Any:
    raw = annotations.get(key)
    return None if raw is None else _decode(raw, key)


def _decode(raw: str, key: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise AnnotationError(key, f"not valid JSON ({exc})") from None
    except RecursionError:
        raise AnnotationError(key, "JSON nested too deeply") from None


def _quantity(value: object, key: str, where: str) -> int:
    try:
        return quantity_value(value)
    except ValueError as exc:
        raise AnnotationError(key, f"{where}: {exc}") from None


# --- scheduling.koordinator.sh/resource-status -----------------------------------------------


@dataclass(frozen=True, slots=True)
class NUMANodeResource:
    """One ``numaNodeResources`` entry; ``has_cpu`` = non-zero cpu or positive batch-cpu."""

    node: int
    has_cpu: bool


@dataclass(frozen=True, slots=True)
class ResourceStatus:
    """The scheduler's CPU placement for a pod."""

    cpuset: str
    numa_nodes: tuple[NUMANodeResource, ...]

    @property
    def numa_aware(self) -> bool:
        return any(n.has_cpu for n in self.numa_nodes)


def resource_status(annotations: Mapping[str, str]) -> ResourceStatus | None:
    raw = annotations.get(keys.ANNOTATION_RESOURCE_STATUS)
    return None if raw is None else _resource_status(raw)


@lru_cache(maxsize=_CACHE_SIZE)
def _resource_status(raw: str) -> ResourceStatus:
    key = keys.ANNOTATION_RESOURCE_STATUS
    doc = _decode(raw, key)
    if not isinstance(doc, dict):
        raise AnnotationError(key, "expected a JSON object")
    cpuset = doc.get("cpuset") or ""
    if not isinstance(cpuset, str):
        raise AnnotationError(key, "cpuset: expected a string")
    if cpuset.strip():
        # koordlet passes the string through; we refuse a malformed list instead of letting the
        # runtime fail the container creation with it.
        try:
            cpuset = check_cpu_list(cpuset)
        except ValueError as exc:
            raise AnnotationError(key, f"cpuset: {exc}") from None
    nodes = doc.get("numaNodeResources") or []
    if not isinstance(nodes, list):
        raise AnnotationError(key, "numaNodeResources: expected a list")
    numa = []
    for i, entry in enumerate(nodes):
        where = f"numaNodeResources[{i}]"
        if not isinstance(entry, dict):
            raise AnnotationError(key, f"{where}: expected an object")
        node = entry.get("node", 0)
        if isinstance(node, bool) or not isinstance(node, int):
            raise AnnotationError(key, f"{where}.node: expected an integer")
        resources = entry.get("resources") or {}
        if not isinstance(resources, dict):
            raise AnnotationError(key, f"{where}.resources: expected an object")
        cpu = resources.get(keys.RESOURCE_CPU)
        batch = resources.get(keys.RESOURCE_BATCH_CPU)
        has_cpu = (cpu is not None and _quantity(cpu, key, f"{where}.resources.cpu") != 0) or (
            batch is not None and _quantity(batch, key, f"{where}.resources.batch-cpu") > 0
        )
        numa.append(NUMANodeResource(node=node, has_cpu=has_cpu))
    return ResourceStatus(cpuset=cpuset.strip(), numa_nodes=tuple(numa))


# --- node.koordinator.sh/extended-resource-spec ----------------------------------------------


@dataclass(frozen=True, slots=True)
class BatchResources:
    """``kubernetes.io/batch-cpu`` (milli-cores) and ``kubernetes.io/batch-memory`` (bytes)."""

    batch_cpu: int | None = None
    batch_memory: int | None = None


@dataclass(frozen=True, slots=True)
class ContainerBatchSpec:
    """One container's batch requests and limits."""

    requests: BatchResources
    limits: BatchResources


def _batch(doc: object, key: str, where: str) -> BatchResources:
    if doc is None:
        return BatchResources()
    if not isinstance(doc, dict):
        raise AnnotationError(key, f"{where}: expected an object")
    cpu = doc.get(keys.RESOURCE_BATCH_CPU)
    mem = doc.get(keys.RESOURCE_BATCH_MEMORY)
    return BatchResources(
        batch_cpu=None if cpu is None else _quantity(cpu, key, f"{where}.batch-cpu"),
        batch_memory=None if mem is None else _quantity(mem, key, f"{where}.batch-memory"),
    )


def extended_resource_spec(
    annotations: Mapping[str, str],
) -> Mapping[str, ContainerBatchSpec] | None:
    """Container name -> batch spec; ``None`` when absent or without a ``containers`` map."""
    raw = annotations.get(keys.ANNOTATION_EXTENDED_RESOURCE_SPEC)
    return None if raw is None else _extended_resource_spec(raw)


@lru_cache(maxsize=_CACHE_SIZE)
def _extended_resource_spec(raw: str) -> Mapping[str, ContainerBatchSpec] | None:
    key = keys.ANNOTATION_EXTENDED_RESOURCE_SPEC
    doc = _decode(raw, key)
    if not isinstance(doc, dict):
        raise AnnotationError(key, "expected a JSON object")
    containers = doc.get("containers")
    if containers is None:
        return None
    if not isinstance(containers, dict):
        raise AnnotationError(key, "containers: expected an object")
    out = {}
    for name, spec in containers.items():
        where = f"containers.{name}"
        if not isinstance(spec, dict):
            raise AnnotationError(key, f"{where}: expected an object")
        out[name] = ContainerBatchSpec(
            requests=_batch(spec.get("requests"), key, f"{where}.requests"),
            limits=_batch(spec.get("limits"), key, f"{where}.limits"),
        )
    return MappingProxyType(out)


# --- scheduling.koordinator.sh/device-allocated ----------------------------------------------


@dataclass(frozen=True, slots=True)
class Device:
    """One allocated device (minor number, per-device resources, id)."""

    minor: int
    resources: Mapping[str, Any]
    id: str = ""


def device_allocations(
    annotations: Mapping[str, str],
) -> Mapping[str, tuple[Device, ...]] | None:
    """Device type (``gpu``, ``rdma``, ``fpga``) -> allocated devices."""
    raw = annotations.get(keys.ANNOTATION_DEVICE_ALLOCATED)
    return None if raw is None else _device_allocations(raw)


@lru_cache(maxsize=_CACHE_SIZE)
def _device_allocations(raw: str) -> Mapping[str, tuple[Device, ...]]:
    key = keys.ANNOTATION_DEVICE_ALLOCATED
    doc = _decode(raw, key)
    if not isinstance(doc, dict):
        raise AnnotationError(key, "expected a JSON object")
    out: dict[str, tuple[Device, ...]] = {}
    for dev_type, entries in doc.items():
        if entries is None:
            continue
        if not isinstance(entries, list):
            raise AnnotationError(key, f"{dev_type}: expected a list")
        devices = []
        for i, entry in enumerate(entries):
            where = f"{dev_type}[{i}]"
            if not isinstance(entry, dict):
                raise AnnotationError(key, f"{where}: expected an object")
            minor = entry.get("minor", 0)
            if isinstance(minor, bool) or not isinstance(minor, int):
                raise AnnotationError(key, f"{where}.minor: expected an integer")
            resources = entry.get("resources") or {}
            if not isinstance(resources, dict):
                raise AnnotationError(key, f"{where}.resources: expected an object")
            dev_id = entry.get("id", "")
            devices.append(
                Device(
                    minor, MappingProxyType(resources), dev_id if isinstance(dev_id, str) else ""
                )
            )
        out[dev_type] = tuple(devices)
    return MappingProxyType(out)


def device_quantity(device: Device, resource: str) -> int | None:
    """A device resource's integer value, ``None`` if absent."""
    value = device.resources.get(resource)
    if value is None:
        return None
    return _quantity(value, keys.ANNOTATION_DEVICE_ALLOCATED, resource)


# --- koordinator.sh/cpuQOS -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CPUQOSOverride:
    """A pod's own ``cpuQOS`` (honoured for LS pods only)."""

    enable: bool | None
    group_identity: int | None


def cpu_qos_override(annotations: Mapping[str, str]) -> CPUQOSOverride | None:
    raw = annotations.get(keys.ANNOTATION_CPU_QOS)
    return None if raw is None else _cpu_qos_override(raw)


@lru_cache(maxsize=_CACHE_SIZE)
def _cpu_qos_override(raw: str) -> CPUQOSOverride:
    key = keys.ANNOTATION_CPU_QOS
    doc = _decode(raw, key)
    if not isinstance(doc, dict):
        raise AnnotationError(key, "expected a JSON object")
    enable = doc.get("enable")
    if enable is not None and not isinstance(enable, bool):
        raise AnnotationError(key, "enable: expected true or false")
    gi = doc.get("groupIdentity")
    if gi is not None:
        if isinstance(gi, bool) or not isinstance(gi, int):
            raise AnnotationError(key, "groupIdentity: expected an integer")
        if not keys.BVT_MIN <= gi <= keys.BVT_MAX:
            raise AnnotationError(
                key, f"groupIdentity must be in [{keys.BVT_MIN}, {keys.BVT_MAX}] (got {gi})"
            )
    return CPUQOSOverride(enable=enable, group_identity=gi)


# --- node.koordinator.sh/resctrl -------------------------------------------------------------


def resctrl_config(annotations: Mapping[str, str]) -> Mapping[str, Any] | None:
    """The per-pod LLC/MB request (only its presence and shape matter for ``rdt_class``)."""
    raw = annotations.get(keys.ANNOTATION_RESCTRL)
    return None if raw is None else _resctrl_config(raw)


@lru_cache(maxsize=_CACHE_SIZE)
def _resctrl_config(raw: str) -> Mapping[str, Any]:
    key = keys.ANNOTATION_RESCTRL
    doc = _decode(raw, key)
    if not isinstance(doc, dict):
        raise AnnotationError(key, "expected a JSON object")
    for part in ("llc", "mb"):
        if doc.get(part) is not None and not isinstance(doc[part], dict):
            raise AnnotationError(key, f"{part}: expected an object")
    return MappingProxyType(doc)


# --- koordinator.sh/oom-score-adj(-spec) -----------------------------------------------------


def _oom_value(value: object, key: str) -> int:
    if isinstance(value, bool):
        raise AnnotationError(key, "expected an integer")
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise AnnotationError(key, f"not an integer: {value!r}") from None
    if not isinstance(value, int):
        raise AnnotationError(key, "expected an integer")
    if not keys.OOM_SCORE_ADJ_MIN <= value <= keys.OOM_SCORE_ADJ_MAX:
        raise AnnotationError(
            key, f"{value} out of range [{keys.OOM_SCORE_ADJ_MIN}, {keys.OOM_SCORE_ADJ_MAX}]"
        )
    return value


def oom_score_adj(annotations: Mapping[str, str], container_name: str) -> int | None:
    """The per-container spec wins over the pod default; absent everywhere -> ``None``."""
    spec_key = keys.ANNOTATION_OOM_SCORE_ADJ_SPEC
    spec = _load(annotations, spec_key)
    if spec is not None:
        if not isinstance(spec, dict):
            raise AnnotationError(spec_key, "expected a JSON object of container name -> int")
        if container_name in spec:
            return _oom_value(spec[container_name], spec_key)
    raw = annotations.get(keys.ANNOTATION_OOM_SCORE_ADJ)
    if raw is None:
        return None
    return _oom_value(raw, keys.ANNOTATION_OOM_SCORE_ADJ)
