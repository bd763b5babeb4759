"""The engine's ``Event`` from a request pydantic already validated strictly as ``WebhookRequest``.

The hot route validates a body once, with ``WebhookRequest.model_validate_json(raw,
strict=True)``, and builds the engine's frozen ``Event`` from that model here instead of
decoding the JSON again for ``model.parse_event``. Strict mode is what makes the two agree: it
takes exactly the JSON types ``parse_event`` takes for every field the engine reads (no ``"5"``
for an integer, no ``1`` for a boolean), so converting is attribute reads, no checks.

The few requests a strict model still holds that ``parse_event`` would refuse or read
differently get ``None``, and the caller falls back to the checked path (orjson, lax model,
``parse_event``) so their answer, a 422 naming the field, stays exactly what it was:
``api_version`` absent (the model fills in the default, ``parse_event`` refuses ""), a
``budget_ms`` of 2**64 or more (orjson decodes it as a float), a container state given as
its enum number, and a missing ``pod`` / ``container`` for the event (``parse_event`` names
the field). tests/policy_server/test_contract_event.py proves the ``Event`` equal to
``parse_event``'s for every example and recorded request.

Owns only this conversion. Must not import web frameworks, do I/O, or check types itself
(the contract model did; a check added here would be a second validating pass).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from bridge.contract.catalogue import CONTAINER_EVENTS, EventName
from policy_server.sdk.model import CPU, Container, Event, Memory, Mount, Pod, Resources, no_strings

if TYPE_CHECKING:
    from bridge.contract.webhook_models import WebhookRequest

_EMPTY = no_strings()
_EVENTS: Mapping[str, EventName] = {name.value: name for name in EventName}
# orjson decodes an integer outside [-2**63, 2**64) as a float, which parse_event refuses;
# pydantic keeps it an int. Only budget_ms is an unbounded integer in the envelope (every NRI
# integer is range-checked by the contract).
_ORJSON_INT_END = 2**64


class _NotExact(Exception):
    """The model holds something the engine's parser reads differently: use the checked path."""


def event_from_contract(request: WebhookRequest) -> Event | None:
    """The ``Event`` ``parse_event`` would give for this request, or ``None`` if only the checked
    path can answer it exactly (see the module docstring)."""
    if "api_version" not in request.model_fields_set or request.budget_ms >= _ORJSON_INT_END:
        return None
    name = _EVENTS[request.event]
    if (request.pod is None and name is not EventName.SYNCHRONIZE) or (
        request.container is None and name in CONTAINER_EVENTS
    ):
        return None
    try:
        container = _container(request.container) if request.container is not None else None
        containers = tuple(_container(c) for c in request.containers or ())
    except _NotExact:
        return None
    runtime = request.runtime
    capabilities = runtime.capabilities
    return Event(
        name=name,
        uid=request.uid,
        api_version=request.api_version,
        runtime_name=runtime.name,
        runtime_version=runtime.version,
        runtime_nri_version=runtime.nri_version or "",
        runtime_capabilities=frozenset(capabilities) if capabilities is not None else None,
        budget_ms=request.budget_ms,
        dry_run=request.dry_run,
        pod=_pod(request.pod) if request.pod is not None else None,
        container=container,
        linux_resources=(
            _resources(request.linux_resources) if request.linux_resources is not None else None
        ),
        pods=tuple(_pod(p) for p in request.pods or ()),
        containers=containers,
    )


# The NRI models are built from the proto descriptors at import time (bridge.contract
# .nri_models), so the type checker sees them as Any.


def _pod(p: Any) -> Pod:
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


def _container(c: Any) -> Container:
    state = c.state
    if state is not None and type(state) is not str:
        raise _NotExact  # the contract also takes the enum's number; parse_event names states
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
        state=state or "",
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
    )


def _resources(r: Any) -> Resources:
    cpu, memory, unified = r.cpu, r.memory, r.unified
    return Resources(
        cpu=CPU(cpu.shares, cpu.quota, cpu.period, cpu.cpus, cpu.mems)
        if cpu is not None
        else CPU(),
        memory=Memory(memory.limit) if memory is not None else Memory(),
        unified=_EMPTY if unified is None else unified,
        rdt_class=r.rdt_class,
    )
