"""The request parser the policy server used before issue 19 unified its request path, kept as
the oracle tests/policy_server/engine/test_request_path.py checks the one path against: the
answer to every body (errors included) must be what this parser, behind orjson and the contract in
pydantic's lax mode, gave. Not used by the server."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bridge.contract.catalogue import API_VERSION, CONTAINER_EVENTS, EventName
from policy_server.exceptions import PayloadError
from policy_server.sdk.model import CPU, Container, Event, Memory, Mount, Pod, Resources, no_strings

_EMPTY = no_strings()


def _obj(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise PayloadError(where, f"expected an object, got {_kind(value)}")
    return value


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _str(d: Mapping[str, Any], key: str, where: str) -> str:
    value = d.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise PayloadError(_join(where, key), f"expected a string, got {_kind(value)}")
    return value


def _strs(d: Mapping[str, Any], keys: tuple[str, ...], where: str) -> list[str]:
    """Several optional string fields at once (absent = ""), in ``keys`` order."""
    out = []
    for key in keys:
        value = d.get(key)
        if value is None:
            out.append("")
        elif type(value) is str:
            out.append(value)
        else:
            raise PayloadError(_join(where, key), f"expected a string, got {_kind(value)}")
    return out


def _opt_str(d: Mapping[str, Any], key: str, where: str) -> str | None:
    return _str(d, key, where) if d.get(key) is not None else None


def _opt_int(d: Mapping[str, Any], key: str, where: str) -> int | None:
    value = d.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise PayloadError(_join(where, key), f"expected an integer, got {_kind(value)}")
    return value


def _str_map(d: Mapping[str, Any], key: str, where: str) -> Mapping[str, str]:
    value = d.get(key)
    if value is None:
        return _EMPTY
    if not isinstance(value, dict):
        raise PayloadError(f"{where}.{key}", f"expected an object, got {_kind(value)}")
    for k, v in value.items():
        if type(v) is not str:
            raise PayloadError(f"{where}.{key}.{k}", f"expected a string, got {_kind(v)}")
    return value


def _str_list(d: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = d.get(key)
    if value is None:
        return ()
    if not isinstance(value, list):
        raise PayloadError(f"{where}.{key}", f"expected an array, got {_kind(value)}")
    for item in value:
        if type(item) is not str:
            i = value.index(item)
            raise PayloadError(f"{where}.{key}[{i}]", f"expected a string, got {_kind(item)}")
    return tuple(value)


def parse_resources(value: object, where: str) -> Resources:
    """Convert a ``LinuxResources`` JSON object."""
    d = _obj(value, where)
    cpu = CPU()
    memory = Memory()
    if d.get("cpu") is not None:
        c = _obj(d["cpu"], f"{where}.cpu")
        w = f"{where}.cpu"
        cpu = CPU(
            shares=_opt_int(c, "shares", w),
            quota=_opt_int(c, "quota", w),
            period=_opt_int(c, "period", w),
            cpus=_opt_str(c, "cpus", w),
            mems=_opt_str(c, "mems", w),
        )
    if d.get("memory") is not None:
        m = _obj(d["memory"], f"{where}.memory")
        memory = Memory(limit=_opt_int(m, "limit", f"{where}.memory"))
    return Resources(
        cpu=cpu,
        memory=memory,
        unified=_str_map(d, "unified", where),
        rdt_class=_opt_str(d, "rdt_class", where),
    )


def parse_pod(value: object, where: str) -> Pod:
    """Convert a ``PodSandbox`` JSON object."""
    d = _obj(value, where)
    linux: Mapping[str, Any] = {}
    if d.get("linux") is not None:
        linux = _obj(d["linux"], f"{where}.linux")
    pod_id, name, uid, namespace, handler = _strs(d, _POD_STRINGS, where)
    cgroup_parent, cgroups_path = _strs(linux, _POD_LINUX_STRINGS, f"{where}.linux")
    return Pod(
        id=pod_id,
        name=name,
        uid=uid,
        namespace=namespace,
        labels=_str_map(d, "labels", where),
        annotations=_str_map(d, "annotations", where),
        runtime_handler=handler,
        cgroup_parent=cgroup_parent,
        cgroups_path=cgroups_path,
        ips=_str_list(d, "ips", where),
    )


_POD_STRINGS = ("id", "name", "uid", "namespace", "runtime_handler")
_POD_LINUX_STRINGS = ("cgroup_parent", "cgroups_path")
_CONTAINER_STRINGS = ("id", "pod_sandbox_id", "name", "state")


def _parse_mounts(d: Mapping[str, Any], where: str) -> tuple[Mount, ...]:
    value = d.get("mounts")
    if value is None:
        return ()
    if not isinstance(value, list):
        raise PayloadError(f"{where}.mounts", f"expected an array, got {_kind(value)}")
    # Fast path first: a container has a dozen mounts, on every request, and few policies look
    # at them. Anything unexpected goes through the checked path, which names the field.
    mounts = []
    for item in value:
        if type(item) is not dict:
            break
        dest, kind = item.get("destination", ""), item.get("type", "")
        source, options = item.get("source", ""), item.get("options") or []
        if not (type(dest) is str and type(kind) is str and type(source) is str):
            break
        if type(options) is not list or any(type(o) is not str for o in options):
            break
        mounts.append(Mount(dest, kind, source, tuple(options)))
    else:
        return tuple(mounts)
    return tuple(_parse_mount(item, where, i) for i, item in enumerate(value))


def _parse_mount(item: object, where: str, index: int) -> Mount:
    w = f"{where}.mounts[{index}]"
    m = _obj(item, w)
    return Mount(
        destination=_str(m, "destination", w),
        type=_str(m, "type", w),
        source=_str(m, "source", w),
        options=_str_list(m, "options", w),
    )


def parse_container(value: object, where: str) -> Container:
    """Convert a ``Container`` JSON object."""
    d = _obj(value, where)
    resources: Resources | None = None
    oom: int | None = None
    if d.get("linux") is not None:
        linux = _obj(d["linux"], f"{where}.linux")
        if linux.get("resources") is not None:
            resources = parse_resources(linux["resources"], f"{where}.linux.resources")
        oom = _opt_int(linux, "oom_score_adj", f"{where}.linux")
    pid = _opt_int(d, "pid", where)
    container_id, pod_sandbox_id, name, state = _strs(d, _CONTAINER_STRINGS, where)
    return Container(
        id=container_id,
        pod_sandbox_id=pod_sandbox_id,
        name=name,
        state=state,
        labels=_str_map(d, "labels", where),
        annotations=_str_map(d, "annotations", where),
        args=_str_list(d, "args", where),
        env=_str_list(d, "env", where),
        mounts=_parse_mounts(d, where),
        resources=resources,
        oom_score_adj=oom,
        pid=pid or 0,
    )


def _parse_list(body: Mapping[str, Any], key: str, parse: Any) -> tuple[Any, ...]:
    value = body.get(key)
    if value is None:
        return ()
    if not isinstance(value, list):
        raise PayloadError(key, f"expected an array, got {_kind(value)}")
    return tuple(parse(item, f"{key}[{i}]") for i, item in enumerate(value))


def parse_event(body: object) -> Event:
    """Convert a whole webhook request body into an ``Event``.

    Checks the envelope keys and that the event's payload objects are present (``pod`` for pod
    and container events, ``container`` for container events, ``linux_resources`` is optional).
    """
    d = _obj(body, "body")
    api_version = _str(d, "api_version", "")
    if api_version != API_VERSION:
        raise PayloadError("api_version", f"expected {API_VERSION!r}, got {api_version!r}")
    raw_name = d.get("event")
    try:
        name = EventName(str(raw_name))
    except ValueError:
        raise PayloadError("event", f"unknown event {raw_name!r}") from None
    runtime: Mapping[str, Any] = {}
    if d.get("runtime") is not None:
        runtime = _obj(d["runtime"], "runtime")
    dry_run = d.get("dry_run", False)
    if not isinstance(dry_run, bool):
        raise PayloadError("dry_run", f"expected a boolean, got {_kind(dry_run)}")
    budget = _opt_int(d, "budget_ms", "")
    pod = parse_pod(d["pod"], "pod") if d.get("pod") is not None else None
    container = None
    if d.get("container") is not None:
        container = parse_container(d["container"], "container")
    if name is not EventName.SYNCHRONIZE and pod is None:
        raise PayloadError("pod", f"required for {name}")
    if name in CONTAINER_EVENTS and container is None:
        raise PayloadError("container", f"required for {name}")
    linux_resources = None
    if d.get("linux_resources") is not None:
        linux_resources = parse_resources(d["linux_resources"], "linux_resources")
    return Event(
        name=name,
        uid=_str(d, "uid", ""),
        api_version=api_version,
        runtime_name=_str(runtime, "name", "runtime"),
        runtime_version=_str(runtime, "version", "runtime"),
        runtime_nri_version=_str(runtime, "nri_version", "runtime"),
        runtime_capabilities=(
            frozenset(_str_list(runtime, "capabilities", "runtime"))
            if runtime.get("capabilities") is not None
            else None
        ),
        budget_ms=budget,
        dry_run=dry_run,
        pod=pod,
        container=container,
        linux_resources=linux_resources,
        pods=_parse_list(d, "pods", parse_pod),
        containers=_parse_list(d, "containers", parse_container),
    )
