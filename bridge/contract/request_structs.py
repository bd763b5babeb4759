"""The webhook request, declared once: msgspec Structs, from which everything else derives.

This is the one declaration of what the bridge POSTs (msgspec rather than pydantic: the policy
server decodes every request with these very types, 3-4x faster than a pydantic model on a
node's Synchronize, docs/performance.md, and msgspec writes their JSON Schema itself, so the
published schema is the decoder's own reading and cannot drift from it). Derived from it:

- the published request JSON Schemas (``request_schemas``, written by bridge.contract.schema);
- the policy server's one decoder (policy_server.engine.request decodes into ``WebhookRequest``
  and refuses what these types refuse, with msgspec's path and message);
- the field-limit walk (policy_server.engine.request_fields reads the Structs' fields);
- its keys' order: the encoder's (request_body.ENVELOPE, then the catalogue's payload keys),
  which the Struct is built in, so a key the encoder sends has its type here or the import
  fails (request_body stays free of msgspec: the bridge's serving path does not load it).

Every NRI message is built from the proto descriptors (the same walk as the reply's pydantic
models, descriptor_types) with the types of webhook JSON: strings no longer than
``field_limits`` allows their field, booleans, enum names or integers, lists, string- and
integer-keyed maps, Optional* wrappers as plain values, every field optional, unknown keys
refused. Integers are bounded at their NRI width, unsigned 64-bit ones at 2**63 - 1 (msgspec
cannot bound an integer past int64's range; a runtime never sends one that large). Which
payload keys an event must carry is the catalogue's (``REQUIRED_PAYLOAD``); the per-event
schemas and the decoder both read it. Owns the declaration and its schema; it does no I/O.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import msgspec
from google.protobuf.descriptor import FieldDescriptor

from bridge.contract.adjustment_fields import REMOVABLE
from bridge.contract.catalogue import API_VERSION, EVENT_NAMES, REQUEST_PAYLOAD, REQUIRED_PAYLOAD
from bridge.contract.convert import INT_RANGES
from bridge.contract.descriptor_types import field_type
from bridge.contract.field_limits import KEY, NAME, FieldLimit, limit_of
from bridge.contract.request_body import ENVELOPE
from bridge.proto.nri import api_pb2

FD = FieldDescriptor
_INT64_MAX = 2**63 - 1
_INT_BOUNDS = {kind: (lo, min(hi, _INT64_MAX)) for kind, (lo, hi) in INT_RANGES.items()}
_WIDE = frozenset({FD.TYPE_INT64, FD.TYPE_UINT64, FD.TYPE_SINT64, FD.TYPE_FIXED64,
                   FD.TYPE_SFIXED64})
_UNSIGNED_64 = frozenset({FD.TYPE_UINT64, FD.TYPE_FIXED64})

# What the schema says of an absent NRI field and of a 64-bit integer (docs/webhooks.md,
# "Payload conventions").
ABSENT_MEANS = ("Absent: the runtime did not set it; the bridge sends only set fields and "
                "never fills in a default (an absent limit is no limit, not 0).")
WIDE_INTEGER = ("A 64-bit integer sent as a plain JSON number; it may exceed 2**53 "
                "(9007199254740992), so a JavaScript policy must parse the body with a "
                "BigInt-aware JSON reader (JSON.parse rounds such values).")
UNSIGNED_CAP = " Unsigned in NRI; at most 2**63 - 1 here (a larger value is refused with a 422)."
# Fields whose absence means something worth saying beyond ABSENT_MEANS.
ABSENT_NOTES: Mapping[tuple[str, str], str] = {
    ("LinuxMemory", "limit"): "Memory limit in bytes. Absent: no memory limit (a container's "
    "resources carry no key for it; a pod's pod_resources, kubelet's values as the runtime "
    "passes them, may carry 0, which also means no limit).",
    ("LinuxMemory", "swap"): "Memory + swap limit in bytes. Absent: not set (no swap limit).",
    ("LinuxCPU", "quota"): "CFS quota in microseconds per period. Absent: no CPU limit (as for "
    "the memory limit, a pod's pod_resources may carry kubelet's 0 for the same).",
    ("LinuxCPU", "shares"): "CPU shares (cgroup v1 scale). Absent: the runtime's default.",
    ("LinuxCPU", "cpus"): "cpuset, e.g. 0-3,6. Absent or empty: every CPU the parent allows.",
    ("LinuxPids", "limit"): "Absent: no pids limit.",
}

# Enums the SDK reads as its own enum: only their names are taken (elsewhere a value newer
# than the schema may arrive as a number).
ENUM_NAMES_ONLY = frozenset({("Container", "state")})

_STRUCTS: dict[str, type[msgspec.Struct] | None] = {}


def _text(limit: FieldLimit) -> Any:
    """A string within ``limit``'s length (its other rules: policy_server.engine.request_fields)."""
    return Annotated[str, msgspec.Meta(max_length=limit.max_length)]


def _scalar_type(fd: Any, limit: FieldLimit, names_only: bool = False) -> Any:
    if fd.type in (FD.TYPE_STRING, FD.TYPE_BYTES):
        return _text(limit)
    if fd.type == FD.TYPE_BOOL:
        return bool
    if fd.type in _INT_BOUNDS:
        lo, hi = _INT_BOUNDS[fd.type]
        return Annotated[int, msgspec.Meta(ge=lo, le=hi)]
    if fd.type == FD.TYPE_ENUM:
        names: Any = Literal[tuple(fd.enum_type.values_by_name)]
        return names if names_only else names | int
    # No float field in the messages a request carries; a new one must be declared with care
    # (JSON number forms), so it is refused here rather than guessed.
    raise TypeError(f"unsupported field type {fd.type} for {fd.full_name}")


def _map_key(fd: Any) -> Any:
    if fd.type == FD.TYPE_STRING:
        return _text(KEY)
    if fd.type in _INT_BOUNDS:  # FieldOwners' field numbers: JSON object keys as text
        return int
    raise TypeError(f"{fd.full_name}: only string- and integer-keyed maps are declared")


def _leaf(fd: Any) -> Any:
    """The scalar descriptor a field's values have (a wrapper's ``value``, a map's value)."""
    entry = fd.message_type
    if entry is not None and entry.GetOptions().map_entry:
        return _leaf(entry.fields_by_name["value"])
    if fd.type == FD.TYPE_MESSAGE and entry is not None and "value" in entry.fields_by_name \
            and entry.name.startswith("Optional"):
        return entry.fields_by_name["value"]
    return fd


def _description(message: str, fd: Any) -> str:
    leaf = _leaf(fd)
    text = ABSENT_NOTES.get((message, fd.name), ABSENT_MEANS)
    if leaf.type in _WIDE:
        text += " " + WIDE_INTEGER + (UNSIGNED_CAP if leaf.type in _UNSIGNED_64 else "")
    return text


def _field(message: str, fd: Any) -> Any:
    limit = limit_of(message, fd.name)
    names_only = (message, fd.name) in ENUM_NAMES_ONLY
    typ = field_type(fd, lambda inner: _scalar_type(inner, limit, names_only), nri_struct,
                     _map_key)
    return Annotated[typ | None, msgspec.Meta(description=_description(message, fd))]


def nri_struct(name: str) -> type[msgspec.Struct]:
    """The Struct for NRI message ``name`` (built once)."""
    cached = _STRUCTS.get(name)
    if cached is not None:
        return cached
    if name in _STRUCTS:
        raise TypeError(f"NRI message {name} contains itself: not declared")
    _STRUCTS[name] = None
    desc = api_pb2.DESCRIPTOR.message_types_by_name[name]
    fields = [(fd.name, _field(name, fd), None) for fd in desc.fields]
    struct = msgspec.defstruct(
        name, fields, forbid_unknown_fields=True, module=__name__,
        namespace={"__doc__": f"NRI {name} (nri.pkg.api.v1alpha1.{name}) in webhook JSON form."})
    _STRUCTS[name] = struct
    return struct


PodSandbox: Any = nri_struct("PodSandbox")
Container: Any = nri_struct("Container")
LinuxResources: Any = nri_struct("LinuxResources")
_LinuxContainerUpdate: Any = nri_struct("LinuxContainerUpdate")
_OwningPlugins: Any = nri_struct("OwningPlugins")
_PluginInstance: Any = nri_struct("PluginInstance")


def _doc(text: str, typ: Any = None) -> Any:
    return msgspec.Meta(description=text) if typ is None else Annotated[
        typ, msgspec.Meta(description=text)]


_Name: Any = _text(NAME)


class RuntimeRef(msgspec.Struct, forbid_unknown_fields=True):
    """The runtime that sent the event."""

    name: Annotated[_Name, _doc("runtime name as sent in Configure, e.g. containerd")]
    version: Annotated[_Name, _doc("runtime version, e.g. 1.7.24~ds1")]
    nri_version: Annotated[_Name | None, _doc(
        "the runtime's NRI version, e.g. v0.11.0: as the runtime reported it (NRI v0.12+), "
        "else inferred from name and version; null or absent if unknown")] = None
    capabilities: Annotated[list[_Name] | None, _doc(
        "adjustment fields this runtime's NRI version applies, by path (e.g. "
        "linux.resources.pids, args, linux.sysctl); a field not listed is dropped: silently by "
        "the runtime, or, if it would crash the runtime (linux.sysctl on NRI v0.11), by the "
        "bridge; null or absent if the NRI version is unknown")] = None


Removals: Any = msgspec.defstruct(
    "Removals",
    [(name, Annotated[list[str] | None, _doc(f"{name} the merged adjustment removes")], None)
     for name in REMOVABLE],
    forbid_unknown_fields=True, module=__name__,
    namespace={"__doc__": "Entries the merged adjustment removes (NRI's '-' markers, decoded)."})


class Adjustment(nri_struct("ContainerAdjustment")):  # type: ignore[misc]
    """ValidateContainerAdjustment's merged ``adjust``: a ContainerAdjustment plus removals."""

    remove: Removals | None = None


class Update(msgspec.Struct, forbid_unknown_fields=True):
    """One merged ContainerUpdate (ValidateContainerAdjustment)."""

    container_id: Annotated[str, msgspec.Meta(min_length=1, max_length=NAME.max_length)]
    linux: _LinuxContainerUpdate | None = None
    ignore_failure: bool | None = None


_Budget = Annotated[int, msgspec.Meta(ge=0, le=_INT64_MAX, description=(
    "milliseconds left to answer before the bridge gives up"))]
_Event = Annotated[Literal[EVENT_NAMES], msgspec.Meta(  # type: ignore[valid-type]
    description="the NRI event name")]
_Version = Annotated[Literal[API_VERSION], msgspec.Meta(  # type: ignore[valid-type]
    description="the contract's version; a breaking change gets a new one. Required.")]


# Each key's type and default (``REQUIRED``: none). The keys are taken in the encoder's order
# (request_body.ENVELOPE, then the payload keys as the catalogue lists them), so the Struct, its
# schema and the bytes the bridge sends list the same keys in the same order; a key without a
# type here, or typed here but never sent, fails at import.
REQUIRED: Any = msgspec.NODEFAULT
_KEYS: Mapping[str, tuple[Any, Any]] = {
    "api_version": (_Version, REQUIRED),
    "uid": (Annotated[_Name, _doc("unique id of this request (the same for every webhook of "
                                  "the event), for logs and idempotency")], REQUIRED),
    "event": (_Event, REQUIRED),
    "runtime": (RuntimeRef, REQUIRED),
    "budget_ms": (_Budget, REQUIRED),
    "dry_run": (Annotated[bool, _doc("true when the reply will not be applied (shadow mode, "
                                     "replay)")], False),
    "pod": (Annotated[PodSandbox | None, _doc("the event's pod (every event but Synchronize)")],
            None),
    "container": (Annotated[Container | None, _doc("the event's container (container "
                                                   "events)")], None),
    "linux_resources": (Annotated[LinuxResources | None, _doc(
        "UpdateContainer / UpdatePodSandbox: the requested resources")], None),
    "overhead_linux_resources": (Annotated[LinuxResources | None, _doc(
        "UpdatePodSandbox: the pod's overhead")], None),
    "pods": (Annotated[list[PodSandbox] | None, _doc("Synchronize: every pod ([] when none)")],
             None),
    "containers": (Annotated[list[Container] | None, _doc(
        "Synchronize: every container ([] when none)")], None),
    "adjust": (Annotated[Adjustment | None, _doc(
        "ValidateContainerAdjustment: the merged adjustment")], None),
    "update": (Annotated[list[Update] | None, _doc(
        "ValidateContainerAdjustment: the merged updates ([] when none)")], None),
    "owners": (Annotated[_OwningPlugins | None, _doc(
        "ValidateContainerAdjustment: which plugin set each field")], None),
    "plugins": (Annotated[list[_PluginInstance] | None, _doc(
        "ValidateContainerAdjustment: the plugins that took part ([] when none)")], None),
}
PAYLOAD_KEYS: tuple[str, ...] = tuple(dict.fromkeys(
    key for event in EVENT_NAMES for key in REQUEST_PAYLOAD[event]))
_ORDER = ENVELOPE + PAYLOAD_KEYS
if set(_ORDER) != set(_KEYS) or len(_ORDER) != len(_KEYS):
    raise TypeError(f"request keys typed {sorted(_KEYS)} but sent {list(_ORDER)}")
WebhookRequest: Any = msgspec.defstruct(
    "WebhookRequest",
    [(key, *_KEYS[key]) if _KEYS[key][1] is not REQUIRED else (key, _KEYS[key][0])
     for key in _ORDER],
    forbid_unknown_fields=True, module=__name__,
    namespace={"__doc__": "What the bridge POSTs to a policy for one NRI event."})


class State(msgspec.Struct, forbid_unknown_fields=True):
    """The bridge's state (``GET /v1/state``'s pods and containers) as the request carries them."""

    pods: list[PodSandbox]
    containers: list[Container]


# What the per-event request schema says of the event, beyond its payload (docs/webhooks.md).
EVENT_NOTES: Mapping[str, str] = {
    "UpdateContainer": (
        "The container is being updated to linux_resources. The reply's update may name this "
        "same container: its fields replace the requested ones (the runtime applies the memory "
        "limit and the CPU fields of it, docs/webhooks.md); it may also update other "
        "containers."),
    "CreateContainer": (
        "The container is being created: change it with the reply's adjust; an update naming "
        "it is refused (update only other, existing containers)."),
}


def _schema_document() -> dict[str, Any]:
    (_ref,), components = msgspec.json.schema_components([WebhookRequest],
                                                         ref_template="#/$defs/{name}")
    root = copy.deepcopy(components.pop("WebhookRequest"))
    return {**root, "$defs": components, "title": "request", "$id": "request.schema.json"}


def _not_null(prop: dict[str, Any]) -> dict[str, Any]:
    options = [o for o in prop.pop("anyOf") if o != {"type": "null"}]
    prop.pop("default", None)
    (only,) = options
    return {**prop, **only}


def request_schemas(dialect: str) -> dict[str, dict[str, Any]]:
    """The published request schemas: ``request.schema.json`` (any event) and
    ``events/<Event>.request.schema.json`` (its payload keys, the required ones required)."""
    base = {"$schema": dialect, **_schema_document()}
    docs = {"request.schema.json": base}
    for event in EVENT_NAMES:
        schema = copy.deepcopy(base)
        keep = set(ENVELOPE) | set(REQUEST_PAYLOAD[event])
        schema["properties"] = {k: v for k, v in schema["properties"].items() if k in keep}
        schema["properties"]["event"] = {"const": event, "description": "the NRI event name"}
        schema["required"] = sorted(set(schema.get("required", [])) | set(REQUIRED_PAYLOAD[event]))
        for key in REQUIRED_PAYLOAD[event]:  # required: null is not a value
            schema["properties"][key] = _not_null(schema["properties"][key])
        schema["title"] = f"{event}.request"
        schema["$id"] = f"{event}.request.schema.json"
        note = EVENT_NOTES.get(event)
        if note is not None:
            schema["description"] = f"{schema['description']} {note}"
        docs[f"events/{event}.request.schema.json"] = schema
    return docs
