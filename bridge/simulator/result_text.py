"""Human and JSON renderings of simulator results (the CLI's output)."""

from __future__ import annotations

from typing import Any

from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message

from bridge.proto.nri import api_pb2 as api
from bridge.runtime_facts.linux_resources import (
    CPU_STRING_FIELDS,
    CPU_WRAPPED_FIELDS,
    MEMORY_FIELDS,
)
from bridge.simulator.delivery import EventResult


def describe_resources(resources: api.LinuxResources, prefix: str = "") -> list[str]:
    """Set fields as `mem.limit=…`, `cpu.shares=…` items."""
    items = []
    for name, _ in MEMORY_FIELDS:
        if resources.memory.HasField(name):
            items.append(f"{prefix}mem.{name}={getattr(resources.memory, name).value}")
    for name, _ in CPU_WRAPPED_FIELDS:
        if resources.cpu.HasField(name):
            items.append(f"{prefix}cpu.{name}={getattr(resources.cpu, name).value}")
    for name, _ in CPU_STRING_FIELDS:
        if getattr(resources.cpu, name):
            items.append(f"{prefix}cpu.{name}={getattr(resources.cpu, name)}")
    for limit in resources.hugepage_limits:
        items.append(f"{prefix}hugepages.{limit.page_size}={limit.limit}")
    for key, value in sorted(resources.unified.items()):
        items.append(f"{prefix}unified.{key}={value}")
    for name in ("blockio_class", "rdt_class"):
        if resources.HasField(name):
            items.append(f"{prefix}{name}={getattr(resources, name).value}")
    if resources.HasField("pids"):
        items.append(f"{prefix}pids.limit={resources.pids.limit}")
    return items


def describe_adjustment(adjust: api.ContainerAdjustment) -> list[str]:
    items = [f"annotation {k}" if k.startswith("-") else f"annotation {k}={v}"
             for k, v in sorted(adjust.annotations.items())]
    items += [f"env {kv.key}" if kv.key.startswith("-") else f"env {kv.key}={kv.value}"
              for kv in adjust.env]
    items += [f"mount {m.destination}" for m in adjust.mounts]
    items += [f"device {d.path}" for d in adjust.linux.devices]
    items += [f"cdi {d.name}" for d in adjust.CDI_devices]
    hooks = sum(len(getattr(adjust.hooks, kind)) for kind in
                ("prestart", "create_runtime", "create_container", "start_container",
                 "poststart", "poststop"))
    if hooks:
        items.append(f"{hooks} hook(s)")
    linux = adjust.linux
    items += describe_resources(linux.resources)
    if linux.HasField("oom_score_adj"):
        items.append(f"oom_score_adj={linux.oom_score_adj.value}")
    if linux.cgroups_path:
        items.append(f"cgroups_path={linux.cgroups_path}")
    items += [f"namespace {ns.type}" for ns in linux.namespaces]
    items += [f"sysctl {k}={v}" for k, v in sorted(linux.sysctl.items())]
    items += [f"rlimit {r.type}={r.soft}/{r.hard}" for r in adjust.rlimits]
    if adjust.args:
        items.append("args " + " ".join(adjust.args))
    return items


def describe_changes(result: EventResult, request: Any = None) -> str:
    """What the plugins changed, in one line ("no change" if nothing)."""
    items: list[str] = []
    response = result.response
    if isinstance(response, api.CreateContainerResponse) and response.HasField("adjust"):
        items += describe_adjustment(response.adjust)
    for update in result.updates:
        items.append(f"update {update.container_id[:12]}: "
                     + (", ".join(describe_resources(update.linux.resources)) or "-"))
    requested = getattr(request, "linux_resources", None)
    if (isinstance(response, api.UpdateContainerResponse) and response.update
            and response.update[-1].linux.resources != requested):
        effective = response.update[-1]
        items.append("effective " + (", ".join(describe_resources(effective.linux.resources))
                                     or "-"))
    return "; ".join(items) if items else "no change"


def subject(request: Any) -> str:
    """`namespace/pod[/container]` of an event request."""
    pod = request.pod
    name = f"{pod.namespace}/{pod.name}" if pod.name else pod.id[:12]
    if "container" in request.DESCRIPTOR.fields_by_name and request.HasField("container"):
        name += f"/{request.container.name or request.container.id[:12]}"
    return name


def format_result(result: EventResult, request: Any) -> str:
    outcome = f"FAILED: {result.error}" if result.error else describe_changes(result, request)
    return (f"{result.latency_s * 1e3:8.3f} ms  {result.event:<22} {subject(request):<48} "
            f"{outcome}")


def result_to_dict(result: EventResult, request: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "event": result.event, "subject": subject(request),
        "latency_us": round(result.latency_s * 1e6, 1), "error": result.error,
        "changes": None if result.error else describe_changes(result, request),
    }
    if result.response is not None:
        out["response"] = _to_dict(result.response)
    return out


def _to_dict(message: Message) -> dict[str, Any]:
    return MessageToDict(message, preserving_proto_field_name=True)
