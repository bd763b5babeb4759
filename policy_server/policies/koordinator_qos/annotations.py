"""Typed parsing of the pod annotations koordinator's hooks read (docs/koordinator.md#the-hooks,
docs/koordinator.md#rules).

Each function returns ``None`` when the annotation is absent and raises ``AnnotationError``
(a ``PolicyError``) naming the annotation and the key path inside it when it is present but
unusable; the hook decides whether that is a hook error or only a warning, as koordlet does. The
JSON objects are checked by pydantic models (keys koordinator adds that we do not read are
ignored) whose field types carry the messages; quantities and ranges are read after. Pure: no
I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, TypeAdapter, ValidationError

from policy_server.policies.koordinator_qos import keys
from policy_server.sdk import PolicyError, check_cpu_list, quantity_value

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


def _object(value: object) -> object:
    if not isinstance(value, dict):
        raise ValueError("expected an object")
    return value


def _object_or_none(value: object) -> object:
    return None if value is None else _object(value)


def _object_or_empty(value: object) -> object:
    return _object(value or {})


def _list_or_empty(value: object) -> object:
    value = value or []
    if not isinstance(value, list):
        raise ValueError("expected a list")
    return value


def _list_or_none(value: object) -> object:
    if value is not None and not isinstance(value, list):
        raise ValueError("expected a list")
    return value


def _integer(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("expected an integer")
    return value


def _optional_integer(value: object) -> int | None:
    return None if value is None else _integer(value)


def _optional_bool(value: object) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise ValueError("expected true or false")
    return value


def _string_or_empty(value: object) -> str:
    value = value or ""
    if not isinstance(value, str):
        raise ValueError("expected a string")
    return value


class _Shape(BaseModel):
    """An annotation's JSON object, or an object inside it: keys we do not read are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True, arbitrary_types_allowed=True)


Object = Annotated[dict[str, Any], BeforeValidator(_object_or_empty)]
Integer = Annotated[int, BeforeValidator(_integer)]
T = TypeVar("T")


def _shape(adapter: TypeAdapter[T], doc: object, key: str) -> T:
    """``doc`` (a decoded annotation) checked by ``adapter``; the first problem as an
    ``AnnotationError`` naming the key path inside the annotation."""
    if not isinstance(doc, dict):
        raise AnnotationError(key, "expected a JSON object")
    try:
        return adapter.validate_python(doc)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
    where = ""
    for part in first["loc"]:
        if isinstance(part, str) and part.startswith("function-"):
            continue
        where += f"[{part}]" if isinstance(part, int) else f".{part}" if where else str(part)
    message = str(first["msg"]).removeprefix("Value error, ")
    raise AnnotationError(key, f"{where}: {message}" if where else message) from None


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


def _cpuset(value: object) -> str:
    cpuset = _string_or_empty(value)
    # koordlet passes the string through; we refuse a malformed list instead of letting the
    # runtime fail the container creation with it.
    return check_cpu_list(cpuset) if cpuset.strip() else cpuset


class _NUMANodeShape(_Shape):
    node: Integer = 0
    resources: Object = {}


class _ResourceStatusShape(_Shape):
    cpuset: Annotated[str, BeforeValidator(_cpuset)] = ""
    numaNodeResources: Annotated[
        tuple[Annotated[_NUMANodeShape, BeforeValidator(_object)], ...],
        BeforeValidator(_list_or_empty),
    ] = ()


_RESOURCE_STATUS = TypeAdapter(_ResourceStatusShape)


@lru_cache(maxsize=_CACHE_SIZE)
def _resource_status(raw: str) -> ResourceStatus:
    key = keys.ANNOTATION_RESOURCE_STATUS
    doc = _shape(_RESOURCE_STATUS, _decode(raw, key), key)
    numa = []
    for i, entry in enumerate(doc.numaNodeResources):
        where = f"numaNodeResources[{i}]"
        cpu = entry.resources.get(keys.RESOURCE_CPU)
        batch = entry.resources.get(keys.RESOURCE_BATCH_CPU)
        has_cpu = (cpu is not None and _quantity(cpu, key, f"{where}.resources.cpu") != 0) or (
            batch is not None and _quantity(batch, key, f"{where}.resources.batch-cpu") > 0
        )
        numa.append(NUMANodeResource(node=entry.node, has_cpu=has_cpu))
    return ResourceStatus(cpuset=doc.cpuset.strip(), numa_nodes=tuple(numa))


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


def _batch(doc: Mapping[str, Any] | None, key: str, where: str) -> BatchResources:
    if doc is None:
        return BatchResources()
    cpu = doc.get(keys.RESOURCE_BATCH_CPU)
    mem = doc.get(keys.RESOURCE_BATCH_MEMORY)
    return BatchResources(
        batch_cpu=None if cpu is None else _quantity(cpu, key, f"{where}.batch-cpu"),
        batch_memory=None if mem is None else _quantity(mem, key, f"{where}.batch-memory"),
    )


_OptionalObject = Annotated[dict[str, Any] | None, BeforeValidator(_object_or_none)]


class _ContainerBatchShape(_Shape):
    requests: _OptionalObject = None
    limits: _OptionalObject = None


class _ExtendedResourceSpecShape(_Shape):
    containers: Annotated[
        dict[str, Annotated[_ContainerBatchShape, BeforeValidator(_object)]] | None,
        BeforeValidator(_object_or_none),
    ] = None


_EXTENDED_RESOURCE_SPEC = TypeAdapter(_ExtendedResourceSpecShape)


def extended_resource_spec(
    annotations: Mapping[str, str],
) -> Mapping[str, ContainerBatchSpec] | None:
    """Container name -> batch spec; ``None`` when absent or without a ``containers`` map."""
    raw = annotations.get(keys.ANNOTATION_EXTENDED_RESOURCE_SPEC)
    return None if raw is None else _extended_resource_spec(raw)


@lru_cache(maxsize=_CACHE_SIZE)
def _extended_resource_spec(raw: str) -> Mapping[str, ContainerBatchSpec] | None:
    key = keys.ANNOTATION_EXTENDED_RESOURCE_SPEC
    doc = _shape(_EXTENDED_RESOURCE_SPEC, _decode(raw, key), key)
    if doc.containers is None:
        return None
    out = {}
    for name, spec in doc.containers.items():
        where = f"containers.{name}"
        out[name] = ContainerBatchSpec(
            requests=_batch(spec.requests, key, f"{where}.requests"),
            limits=_batch(spec.limits, key, f"{where}.limits"),
        )
    return MappingProxyType(out)


# --- scheduling.koordinator.sh/device-allocated ----------------------------------------------


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    """One allocated device (minor number, per-device resources, id)."""

    minor: int
    resources: Mapping[str, Any]
    id: str = ""


def device_allocations(
    annotations: Mapping[str, str],
) -> Mapping[str, tuple[AllocatedDevice, ...]] | None:
    """Device type (``gpu``, ``rdma``, ``fpga``) -> allocated devices."""
    raw = annotations.get(keys.ANNOTATION_DEVICE_ALLOCATED)
    return None if raw is None else _device_allocations(raw)


def _id(value: object) -> str:
    return value if isinstance(value, str) else ""


class _DeviceShape(_Shape):
    minor: Integer = 0
    resources: Object = {}
    id: Annotated[str, BeforeValidator(_id)] = ""


_DEVICE_ALLOCATIONS = TypeAdapter(
    dict[
        str,
        Annotated[
            tuple[Annotated[_DeviceShape, BeforeValidator(_object)], ...] | None,
            BeforeValidator(_list_or_none),
        ],
    ]
)


@lru_cache(maxsize=_CACHE_SIZE)
def _device_allocations(raw: str) -> Mapping[str, tuple[AllocatedDevice, ...]]:
    key = keys.ANNOTATION_DEVICE_ALLOCATED
    doc = _shape(_DEVICE_ALLOCATIONS, _decode(raw, key), key)
    return MappingProxyType(
        {
            dev_type: tuple(AllocatedDevice(d.minor, MappingProxyType(d.resources), d.id)
                            for d in entries)
            for dev_type, entries in doc.items()
            if entries is not None
        }
    )


def device_quantity(device: AllocatedDevice, resource: str) -> int | None:
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


class _CPUQOSShape(_Shape):
    enable: Annotated[bool | None, BeforeValidator(_optional_bool)] = None
    groupIdentity: Annotated[int | None, BeforeValidator(_optional_integer)] = None


_CPU_QOS = TypeAdapter(_CPUQOSShape)


@lru_cache(maxsize=_CACHE_SIZE)
def _cpu_qos_override(raw: str) -> CPUQOSOverride:
    key = keys.ANNOTATION_CPU_QOS
    doc = _shape(_CPU_QOS, _decode(raw, key), key)
    gi = doc.groupIdentity
    if gi is not None and not keys.BVT_MIN <= gi <= keys.BVT_MAX:
        raise AnnotationError(
            key, f"groupIdentity must be in [{keys.BVT_MIN}, {keys.BVT_MAX}] (got {gi})"
        )
    return CPUQOSOverride(enable=doc.enable, group_identity=gi)


# --- node.koordinator.sh/resctrl -------------------------------------------------------------


def resctrl_config(annotations: Mapping[str, str]) -> Mapping[str, Any] | None:
    """The per-pod LLC/MB request (only its presence and shape matter for ``rdt_class``)."""
    raw = annotations.get(keys.ANNOTATION_RESCTRL)
    return None if raw is None else _resctrl_config(raw)


class _ResctrlShape(_Shape):
    llc: _OptionalObject = None
    mb: _OptionalObject = None


_RESCTRL = TypeAdapter(_ResctrlShape)


@lru_cache(maxsize=_CACHE_SIZE)
def _resctrl_config(raw: str) -> Mapping[str, Any]:
    key = keys.ANNOTATION_RESCTRL
    doc = _decode(raw, key)
    _shape(_RESCTRL, doc, key)
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
    found = oom_score_adj_from(annotations, container_name)
    return None if found is None else found[0]


def oom_score_adj_from(
    annotations: Mapping[str, str], container_name: str
) -> tuple[int, str] | None:
    """``oom_score_adj`` with the annotation it came from; absent everywhere -> ``None``."""
    spec_key = keys.ANNOTATION_OOM_SCORE_ADJ_SPEC
    spec = _load(annotations, spec_key)
    if spec is not None:
        if not isinstance(spec, dict):
            raise AnnotationError(spec_key, "expected a JSON object of container name -> int")
        if container_name in spec:
            return _oom_value(spec[container_name], spec_key), spec_key
    raw = annotations.get(keys.ANNOTATION_OOM_SCORE_ADJ)
    if raw is None:
        return None
    return _oom_value(raw, keys.ANNOTATION_OOM_SCORE_ADJ), keys.ANNOTATION_OOM_SCORE_ADJ
