"""The SDK's ``Event`` from a decoded request (the request decoder's msgspec Structs).

Owns the conversion, attribute by attribute, from the Structs ``policy_server.engine.request``
decodes a body into (``bridge.contract.request_structs`` plus ValidateContainerAdjustment's
keys) to the SDK's frozen values; the decoder decides which bodies get here. The NRI Structs
are built from the proto descriptors at import time, so the type checker sees them as Any.
Also owns the ``Event`` a ``Payload.BODY`` policy gets: ``event_of(..., payload=False)`` builds
only the envelope and the body, ``without_payload`` takes the typed payload off a built one, and
``names_of`` reads the pod's and the container's names back from its body for log lines.
Must not refuse anything (the decoder did), import web frameworks or do I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, replace
from operator import attrgetter
from typing import Any, TypedDict

import msgspec

from bridge.contract.catalogue import EventName
from policy_server.sdk.decision_json import adjustment_from_json, update_from_json
from policy_server.sdk.limit_checks import request_values
from policy_server.sdk.model import CPU, Container, Event, Image, Memory, Pod, Resources, User
from policy_server.sdk.oci import Mount, Rlimit, no_strings
from policy_server.sdk.validation import NO_OWNERS, FieldOwners, Owners, Plugin, field_name

_EMPTY = no_strings()
EVENTS: Mapping[str, EventName] = {name.value: name for name in EventName}
# The typed payload (what ``_payload`` builds) and its defaults, what a ``Payload.BODY``
# policy's Event holds; the rest of an Event is its envelope and body.
PAYLOAD_FIELDS = (
    "pod", "container", "linux_resources", "pods", "containers", "adjust", "update", "owners",
    "plugins",
)
_DEFAULTS: Mapping[str, Any] = {
    f.name: f.default for f in fields(Event) if f.name in PAYLOAD_FIELDS
}
_DEFAULT_VALUES = tuple(_DEFAULTS[name] for name in PAYLOAD_FIELDS)
_payload_values = attrgetter(*PAYLOAD_FIELDS)
_NONE: Mapping[str, Any] = {}


def event_of(request: Any, raw: bytes, payload: bool = True) -> Event:
    """The SDK's ``Event`` from the decoded request; with ``payload=False`` only its envelope
    and body (the typed objects at their defaults, as ``without_payload`` leaves them)."""
    runtime = request.runtime
    capabilities = runtime.capabilities
    return Event(
        name=EVENTS[request.event],
        uid=request.uid,
        api_version=request.api_version,
        runtime_name=runtime.name,
        runtime_version=runtime.version,
        runtime_nri_version=runtime.nri_version or "",
        runtime_capabilities=frozenset(capabilities) if capabilities is not None else None,
        budget_ms=request.budget_ms,
        dry_run=request.dry_run,
        body=raw,
        **(_payload(request) if payload else _NONE),
    )


def _payload(request: Any) -> dict[str, Any]:
    """The ``Event``'s typed payload, by field."""
    adjust, owners = request.adjust, request.owners
    return {
        "pod": pod_of(request.pod) if request.pod is not None else None,
        "container": container_of(request.container) if request.container is not None else None,
        "linux_resources": (
            _resources(request.linux_resources) if request.linux_resources is not None else None
        ),
        "pods": tuple(pod_of(p) for p in request.pods or ()),
        "containers": tuple(container_of(c) for c in request.containers or ()),
        **_merged(adjust, request.update),
        "owners": _owners(owners) if owners is not None else NO_OWNERS,
        "plugins": tuple(Plugin(p.name or "", p.index or "") for p in request.plugins or ()),
    }


def _merged(adjust: Any, updates: Any) -> dict[str, Any]:
    """ValidateContainerAdjustment's merged adjustment and updates: other plugins' values, read
    without the reply's value limits (sdk.limit_checks.request_values)."""
    with request_values():
        return {"adjust": adjustment_from_json(_json(adjust)) if adjust is not None else None,
                "update": tuple(update_from_json(_json(u)) for u in updates or ())}


def without_payload(event: Event) -> Event:
    """``event`` with its typed payload at the defaults (itself when it has none)."""
    if _payload_values(event) == _DEFAULT_VALUES:
        return event
    return replace(event, **_DEFAULTS)


class _NamedPod(TypedDict, total=False):
    namespace: str
    name: str


class _NamedContainer(TypedDict, total=False):
    name: str


class _Named(TypedDict, total=False):
    pod: _NamedPod | None
    container: _NamedContainer | None


_NAMES = msgspec.json.Decoder(_Named)


def names_of(body: bytes) -> tuple[str | None, str | None]:
    """``(namespace/name, container name)`` of the request ``body`` (None where it has none),
    for a log line about an event without its typed payload. Decodes only these keys."""
    try:
        named = _NAMES.decode(body)
    except (msgspec.DecodeError, ValueError, RecursionError):
        return None, None
    pod, container = named.get("pod") or {}, named.get("container") or {}
    where = f"{pod.get('namespace', '')}/{pod.get('name', '')}" if pod else None
    return where, container.get("name")


def _json(struct: Any) -> dict[str, Any]:
    """A decoded Struct as its JSON value (absent fields left out)."""
    value: dict[str, Any] = _without_none(msgspec.to_builtins(struct))
    return value


def _without_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value]
    return value


def _owners(owning: Any) -> Owners:
    containers = {}
    for cid, owners in (owning.owners or {}).items():
        simple = {field_name(n): who for n, who in (owners.simple or {}).items()}
        compound = {
            field_name(n): dict(keyed.owners or {}) for n, keyed in (owners.compound or {}).items()
        }
        containers[cid] = FieldOwners(simple, compound)
    return Owners(containers)


def pod_of(p: Any) -> Pod:
    linux = p.linux
    labels, annotations = p.labels, p.annotations
    return Pod(
        id=p.id or "",
        name=p.name or "",
        uid=p.uid or "",
        namespace=p.namespace or "",
        labels=_EMPTY if labels is None else labels,
        annotations=_EMPTY if annotations is None else annotations,
        runtime_handler=p.runtime_handler or "",
        cgroup_parent=(linux.cgroup_parent or "") if linux is not None else "",
        cgroups_path=(linux.cgroups_path or "") if linux is not None else "",
        ips=tuple(p.ips) if p.ips is not None else (),
    )


def container_of(c: Any) -> Container:
    linux = c.linux
    resources = oom = None
    if linux is not None:
        if linux.resources is not None:
            resources = _resources(linux.resources)
        oom = linux.oom_score_adj
    labels, annotations, args, env, mounts = c.labels, c.annotations, c.args, c.env, c.mounts
    return Container(
        id=c.id or "",
        pod_sandbox_id=c.pod_sandbox_id or "",
        name=c.name or "",
        state=c.state or "",
        labels=_EMPTY if labels is None else labels,
        annotations=_EMPTY if annotations is None else annotations,
        args=tuple(args) if args is not None else (),
        env=tuple(env) if env is not None else (),
        mounts=tuple(
            [
                Mount(
                    m.destination or "",
                    m.type or "",
                    m.source or "",
                    tuple(m.options) if m.options else (),
                )
                for m in mounts
            ]
        )
        if mounts is not None
        else (),
        resources=resources,
        oom_score_adj=oom,
        pid=c.pid or 0,
        user=_user(c.user) if c.user is not None else None,
        image=Image(c.image.name or "", c.image.digest or "", c.image.config_digest or "")
        if c.image is not None
        else None,
        exit_code=c.exit_code,
        status_reason=c.status_reason or "",
        status_message=c.status_message or "",
        cdi_devices=tuple(d.name or "" for d in c.CDI_devices) if c.CDI_devices else (),
        sysctl=_EMPTY if linux is None or linux.sysctl is None else linux.sysctl,
        rlimits=tuple(Rlimit(r.type or "", r.soft or 0, r.hard or 0) for r in c.rlimits)
        if c.rlimits
        else (),
    )


def _user(u: Any) -> User:
    gids = u.additional_gids
    return User(u.uid or 0, u.gid or 0, tuple(gids) if gids else ())


def _cpu(c: Any) -> CPU:
    return CPU(c.shares, c.quota, c.period, c.cpus, c.mems, c.realtime_runtime, c.realtime_period)


def _resources(r: Any) -> Resources:
    cpu, memory, unified, pids, pages = r.cpu, r.memory, r.unified, r.pids, r.hugepage_limits
    return Resources(
        cpu=_cpu(cpu) if cpu is not None else CPU(),
        memory=Memory(memory.limit, memory.reservation, memory.swap, memory.swappiness)
        if memory is not None
        else Memory(),
        unified=_EMPTY if unified is None else unified,
        rdt_class=r.rdt_class,
        blockio_class=r.blockio_class,
        pids_limit=pids.limit if pids is not None else None,
        hugepage_limits={h.page_size or "": h.limit or 0 for h in pages} if pages else {},
    )
