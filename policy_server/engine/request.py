"""The one request path: webhook request bytes -> the SDK's ``Event``, or the 422 that says why not.

``parse_request`` is the only way a request becomes an ``Event``. The contract is pydantic's
``WebhookRequest`` in strict mode (JSON types exactly: no ``"5"`` for an integer, no ``1`` for
a boolean). A body is first decoded into the contract's msgspec Structs
(``bridge.contract.request_structs``), which take a subset of what the strict model takes, 3-4x
faster; a body they take with nothing the SDK refuses becomes the frozen ``Event`` by attribute
reads (``policy_server.engine.request_event``). Any other body is parsed by the strict model,
and its ``Event`` is built from the model the same way (no second decode of a body either way).
Four things the strict model holds are still refused, each with a ``PayloadError`` naming the
field: ``api_version`` absent (the model fills in its default), a container ``state`` given as
its enum number, and a missing ``pod`` / ``container`` for the event.

A body strict mode refuses is not parsed again for its answer, only explained: it is decoded
with orjson and checked against the contract in pydantic's lax mode, whose errors (or orjson's)
are the 422 detail, exactly as FastAPI would give them. A body lax mode takes is refused only if
strict mode's complaint is about a field the SDK reads (``1`` for ``dry_run``: "expected a
boolean, got a number"), else it is answered (``1`` for a boolean only the contract reads, as
it always was): its ``Event`` is built by the same conversion from the lax model. A
``budget_ms`` of 2**64 or more is explained too (orjson decodes it as a float, which the
contract refuses), as it always was. tests/policy_server/engine/test_request_path.py proves every
answer equal to the server's answer before the request path was unified.

``synchronize_event`` builds the Synchronize the server sends itself (resync, the node
reconciler) from the bridge's state, through the same strict models and conversion.

Owns the request's shape: which bodies are refused, with which error. Must not import web
frameworks, do I/O, or evaluate anything.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError

from bridge.contract import WebhookRequest, request_structs
from bridge.contract.catalogue import API_VERSION, CONTAINER_EVENTS, EventName
from bridge.contract.webhook_models import Container as ContainerModel
from bridge.contract.webhook_models import PodSandbox as PodModel
from policy_server.engine.request_event import EVENTS, container_of, event_of, pod_of
from policy_server.exceptions import PayloadError, RequestError
from policy_server.sdk.model import Event

# orjson decodes an integer outside [-2**63, 2**64) as a float, which the contract refuses;
# pydantic's own JSON parser keeps it an int. Only budget_ms is an unbounded integer in the
# envelope (every NRI integer is range-checked by the contract).
_ORJSON_INT_END = 2**64


def parse_request(raw: bytes) -> Event:
    """The ``Event`` for a webhook request body; raises ``RequestError`` (a 422's detail)."""
    clean = request_structs.decode(raw)
    if (
        clean is not None
        and clean.api_version is not request_structs.ABSENT
        and not _shape_problems(clean)
    ):
        return event_of(clean, raw)
    # Anything else is the strict model's to answer (the Structs take a subset of what it takes).
    try:
        request = WebhookRequest.model_validate_json(raw, strict=True)
    except ValueError as exc:  # ValidationError, or anything else the parser refuses
        return _explained(raw, exc)
    if request.budget_ms >= _ORJSON_INT_END:
        return _explained(raw, None)
    problems = _problems(request)
    if problems:
        raise _refused(request.event, min(problems, key=_first)[1])
    return event_of(request, raw)


def synchronize_event(
    source: str, pods: Sequence[Mapping[str, Any]], containers: Sequence[Mapping[str, Any]]
) -> Event:
    """The Synchronize the server sends itself (``source``: ``resync``, ``reconcile``) for the
    bridge's pods and containers (webhook JSON shape); raises ``PayloadError`` naming the
    first entry the contract refuses."""
    raw = orjson.dumps({"pods": pods, "containers": containers})
    state: Any = request_structs.decode_state(raw)
    if state is None:  # the strict model's to explain (or to take after all)
        try:
            state = _State.model_validate_json(raw, strict=True)
        except ValidationError as exc:
            error = exc.errors(include_url=False)[0]
            raise PayloadError(_field(error["loc"]), error["msg"]) from None
    problems = [
        problem
        for i, container in enumerate(state.containers)
        for problem in _state_problems(container, ("containers", i))
    ]
    if problems:
        raise min(problems, key=_first)[1]
    # Not from a runtime: no NRI version, so no capabilities to claim.
    return Event(
        name=EventName.SYNCHRONIZE,
        uid=f"{source}-{uuid.uuid4()}",
        runtime_name="nri-policy-server",
        runtime_version=source,
        budget_ms=0,
        pods=tuple(pod_of(p) for p in state.pods),
        containers=tuple(container_of(c) for c in state.containers),
        body=raw,
    )


class _State(BaseModel):
    model_config = ConfigDict(extra="forbid")
    pods: list[PodModel]
    containers: list[ContainerModel]


# --- refusals ----------------------------------------------------------------------------------


def _refused(event: str, error: PayloadError) -> RequestError:
    return RequestError(
        [{"loc": field_loc(error.field), "msg": error.message, "type": "value_error"}], event
    )


def _explained(raw: bytes, strict: ValueError | None) -> Event:
    """The answer for a body strict mode refused: orjson's or lax mode's errors, a field the SDK
    reads refused, or (lax mode took it, the SDK reads none of what strict mode refused) the
    ``Event``."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise RequestError(
            [
                {
                    "type": "json_invalid",
                    "loc": ["body", exc.pos],
                    "msg": "JSON decode error",
                    "input": {},
                    "ctx": {"error": exc.msg},
                }
            ]
        ) from None
    try:
        request = WebhookRequest.model_validate(data)
    except ValidationError as exc:
        raise RequestError(
            [{**error, "loc": ["body", *error["loc"]]} for error in exc.errors(include_url=False)]
        ) from None
    problems = _problems(request)
    if isinstance(strict, ValidationError):
        problems += _read_by_the_sdk(strict)
    if problems:
        raise _refused(request.event, min(problems, key=_first)[1])
    return event_of(request, raw)


_Problem = tuple[tuple[int, ...], PayloadError]


def _first(problem: _Problem) -> tuple[int, ...]:
    return problem[0]


def _problems(request: WebhookRequest) -> list[_Problem]:
    """What the strict model holds but the SDK refuses, each with its place in reading order."""
    out: list[_Problem] = []
    if "api_version" not in request.model_fields_set:
        out.append(((_TOP["api_version"],), PayloadError("api_version", _wrong_version(""))))
    return out + _shape_problems(request)


def _shape_problems(request: Any) -> list[_Problem]:
    """``_problems`` but the absent ``api_version``, for the model or the Structs."""
    out: list[_Problem] = []
    name = EVENTS[request.event]
    if request.pod is None and name is not EventName.SYNCHRONIZE:
        out.append(((_REQUIRED, 0), PayloadError("pod", f"required for {name}")))
    if request.container is None and name in CONTAINER_EVENTS:
        out.append(((_REQUIRED, 1), PayloadError("container", f"required for {name}")))
    if request.container is not None:
        out += _state_problems(request.container, ("container",))
    for i, container in enumerate(request.containers or ()):
        out += _state_problems(container, ("containers", i))
    return out


def _wrong_version(got: str) -> str:
    return f"expected {API_VERSION!r}, got {got!r}"


def _state_problems(container: Any, loc: tuple[str | int, ...]) -> list[_Problem]:
    if container.state is None or type(container.state) is str:
        return []
    at = (*loc, "state")
    return [(_rank(at) or (), PayloadError(_field(at), "expected a string, got a number"))]


# The SDK's view of the request: the fields it reads, in the order it reads them (a body with
# several faults is refused for the first). A dict is an object's keys; a list holds its items'
# schema; ``_MAP`` is a string map; a string names the JSON type the field must have.
_MAP = "map"
_RESOURCES = {
    "cpu": {
        "shares": "an integer",
        "quota": "an integer",
        "period": "an integer",
        "cpus": "a string",
        "mems": "a string",
        "realtime_runtime": "an integer",
        "realtime_period": "an integer",
    },
    "memory": {
        "limit": "an integer",
        "reservation": "an integer",
        "swap": "an integer",
        "swappiness": "an integer",
    },
    "unified": _MAP,
    "rdt_class": "a string",
    "blockio_class": "a string",
    "pids": {"limit": "an integer"},
    "hugepage_limits": [{"page_size": "a string", "limit": "an integer"}],
}
_POD = {
    "id": "a string",
    "name": "a string",
    "uid": "a string",
    "namespace": "a string",
    "runtime_handler": "a string",
    "linux": {"cgroup_parent": "a string", "cgroups_path": "a string"},
    "labels": _MAP,
    "annotations": _MAP,
    "ips": ["a string"],
}
_CONTAINER = {
    "linux": {"resources": _RESOURCES, "oom_score_adj": "an integer", "sysctl": _MAP},
    "pid": "an integer",
    "id": "a string",
    "pod_sandbox_id": "a string",
    "name": "a string",
    "state": "a string",
    "labels": _MAP,
    "annotations": _MAP,
    "args": ["a string"],
    "env": ["a string"],
    "mounts": [
        {
            "destination": "a string",
            "type": "a string",
            "source": "a string",
            "options": ["a string"],
        }
    ],
    "user": {"uid": "an integer", "gid": "an integer", "additional_gids": ["an integer"]},
    "image": {"name": "a string", "digest": "a string", "config_digest": "a string"},
    "exit_code": "an integer",
    "status_reason": "a string",
    "status_message": "a string",
    "CDI_devices": [{"name": "a string"}],
    "rlimits": [{"type": "a string", "hard": "an integer", "soft": "an integer"}],
}
_SCHEMA: dict[str, Any] = {
    "api_version": "a string",
    "event": "a string",
    "dry_run": "a boolean",
    "budget_ms": "an integer",
    "pod": _POD,
    "container": _CONTAINER,
    "(required)": None,
    "linux_resources": _RESOURCES,
    "uid": "a string",
    "runtime": {
        "name": "a string",
        "version": "a string",
        "nri_version": "a string",
        "capabilities": ["a string"],
    },
    "pods": [_POD],
    "containers": [_CONTAINER],
}
_TOP = {key: i for i, key in enumerate(_SCHEMA)}
_REQUIRED = _TOP["(required)"]


@cache
def _order(keys: tuple[str, ...]) -> Mapping[str, int]:
    return {key: i for i, key in enumerate(keys)}


def _walk(loc: Iterable[str | int]) -> tuple[tuple[int, ...], Any] | None:
    """(the place in reading order, the expected type) of a field the SDK reads, else None."""
    node: Any = _SCHEMA
    rank: list[int] = []
    for part in loc:
        if isinstance(node, dict):
            index = _order(tuple(node)).get(part) if isinstance(part, str) else None
            if index is None:
                return None
            rank.append(index)
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int):
            rank.append(part)
            node = node[0]
        elif node == _MAP and isinstance(part, str):
            rank.append(0)  # a map's values in the order the body has them
            node = "a string"
        else:
            return None
    return tuple(rank), node


def _rank(loc: Iterable[str | int]) -> tuple[int, ...] | None:
    walked = _walk(loc)
    return walked[0] if walked is not None else None


def _read_by_the_sdk(strict: ValidationError) -> list[_Problem]:
    """Strict mode's complaints about fields the SDK reads (lax mode took the body)."""
    out: list[_Problem] = []
    for error in strict.errors(include_url=False):
        walked = _walk(error["loc"])
        if walked is None or not isinstance(walked[1], str) or walked[1] == _MAP:
            continue
        rank, expected = walked
        message = f"expected {expected}, got {_kind(error['input'])}"
        out.append((rank, PayloadError(_field(error["loc"]), message)))
    return out


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


def _field(loc: Iterable[str | int]) -> str:
    """``("containers", 3, "linux")`` -> ``containers[3].linux``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


def field_loc(field: str) -> list[str | int]:
    """``containers[3].linux.resources`` -> ``["body", "containers", 3, "linux", "resources"]``."""
    loc: list[str | int] = ["body"]
    for part in field.split("."):
        name, _, rest = part.partition("[")
        loc.append(name)
        for index in rest.split("[") if rest else ():
            loc.append(int(index.rstrip("]")))
    return loc
