"""The one request decoder: webhook request bytes -> the SDK's ``Event``, or the 422 that says why.

The request is declared once, in the contract: its msgspec Structs
(``bridge.contract.request_structs.WebhookRequest``, every NRI message built from the proto
descriptors; the published JSON Schemas are generated from the same Structs, so what this
refuses is what the schema refuses). ``parse_request`` decodes a body with it, once, in strict
JSON types (no ``"5"`` for an integer, no ``1`` for a boolean, unknown keys refused), and the
``Event`` is built from the Structs by attribute reads (``engine.request_event``; for a policy
that reads only the body, its envelope alone). A body it refuses gets a 422 whose detail is
msgspec's own: its message, and its path as ``loc`` (``$.container.linux`` -> ``["body",
"container", "linux"]``; ``"..."`` stands for a map's key, which msgspec does not name; a
missing ``api_version`` is msgspec's missing field; a container ``state`` must be its enum
name, the declaration's ``ENUM_NAMES_ONLY``). One rule is checked after decoding, worded the
same way: the payload keys the catalogue requires for the event (``REQUIRED_PAYLOAD``, which the
per-event schemas mark required) must be there, and those it does not carry (``REQUEST_PAYLOAD``,
the per-event schemas' properties) must not. A string that breaks its field's limits
(``bridge.contract.field_limits``: a NUL byte, a control character, too long, a path of the
wrong shape) is refused with a 400 instead, its ``msg`` naming the field
(``container.linux.cgroups_path: contains a NUL byte``; the walk: ``engine.request_fields``).
docs/webhooks.md ("Refused requests", "Field limits") is the contract.

``node_synchronize`` builds the Synchronize the server sends itself (resync, the node
reconciler) from the bridge's state, with the same Structs, checks and conversion; an entry
they refuse is left out and reported, so one bad container never stops a pass.

Owns the request's shape for the policy server: which bodies are refused, with which error.
Must not import web frameworks, do I/O, or evaluate anything.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import msgspec
import orjson

from bridge.contract import request_structs
from bridge.contract.catalogue import REQUEST_PAYLOAD, REQUIRED_PAYLOAD, EventName
from bridge.contract.request_structs import WebhookRequest
from policy_server.engine.request_event import EVENTS, container_of, event_of, pod_of
from policy_server.engine.request_fields import FieldRefusal, refusal, walk_needed
from policy_server.exceptions import RequestError
from policy_server.sdk.model import Event

_REQUEST = msgspec.json.Decoder(WebhookRequest)
_STATE = msgspec.json.Decoder(request_structs.State)
_POD = msgspec.json.Decoder(request_structs.PodSandbox)
_CONTAINER = msgspec.json.Decoder(request_structs.Container)
# msgspec's words for a string over its length bound (the Structs' max_length:
# bridge.contract.field_limits).
_TOO_LONG = re.compile(r"Expected `str` of length <= (\d+)")
_KEY_AT = "key` in `"
FIELD_REFUSED = "field_refused"  # the 400 entry's ``type``
# One step of msgspec's path: ``.key``, ``[3]``, or ``[...]`` (a map's value).
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]|\[\.\.\.\]")
_AT = " - at `"
_BODY: list[str | int] = ["body"]


def parse_request(raw: bytes, payload: bool = True) -> Event:
    """The ``Event`` for a webhook request body; raises ``RequestError`` (a 422's detail).
    ``payload=False``: the body is decoded and checked all the same, but the ``Event`` gets
    only its envelope and body (``event_of``), for a ``Payload.BODY`` policy."""
    try:
        request = _decode(_REQUEST, raw)
    except _Refused as refused:
        raise refused.error() from None
    problem = _sdk_problem(request)
    if problem is not None:
        raise _Refused("value_error", *problem).error(request.event)
    found = refusal(request, walk_needed(raw))
    if found is not None:
        raise _field_refused(found).error(request.event)
    return event_of(request, raw, payload)


@dataclass(frozen=True, slots=True)
class Skipped:
    """An entry of the bridge's state ``node_synchronize`` left out: which list (``pods``,
    ``containers``) and index, its id, name and pod (as far as they are strings), the field
    and what is wrong with it."""

    kind: str
    index: int
    id: str
    name: str
    pod: str
    field: str
    message: str

    def where(self) -> str:
        """``containers[3].linux.cgroups_path`` (``containers[3]``: the entry itself)."""
        return f"{self.kind}[{self.index}]" + (f".{self.field}" if self.field else "")

    def text(self) -> str:
        return f"{self.where()} (id {self.id!r}): {self.message}"

    def json(self) -> dict[str, Any]:
        return {"kind": self.kind, "index": self.index, "id": self.id, "name": self.name,
                "pod": self.pod, "field": self.field, "error": self.message}


@dataclass(frozen=True, slots=True)
class NodeSync:
    """The Synchronize built from the bridge's state, the entries it holds (webhook JSON, in
    order: ``event.containers[i]`` is ``containers[i]``) and those it left out."""

    event: Event
    pods: list[dict[str, Any]]
    containers: list[dict[str, Any]]
    skipped: tuple[Skipped, ...]


def node_synchronize(
    source: str, pods: Sequence[Mapping[str, Any]], containers: Sequence[Mapping[str, Any]],
    raw: bytes = b"",
) -> NodeSync:
    """The Synchronize the server sends itself (``source``: ``resync``, ``reconcile``) for the
    bridge's pods and containers (webhook JSON shape), without the entries the decoder refuses
    (``NodeSync.skipped`` says which and why). The whole state is decoded at once, from ``raw``
    when given (the bytes the bridge sent them as: decoded, not encoded again); only when that
    fails is each entry decoded alone."""
    try:
        raw = raw or orjson.dumps({"pods": pods, "containers": containers})
        state = _decode(_STATE, raw)
    except (_Refused, TypeError):  # TypeError: a str orjson cannot encode (a lone surrogate)
        return _entry_by_entry(source, pods, containers)
    walk = walk_needed(raw)
    if any(refusal(p, walk) for p in state.pods) or any(
        refusal(c, walk) for c in state.containers
    ):
        return _entry_by_entry(source, pods, containers)
    event = _synchronize(source, state.pods, state.containers, raw)
    return NodeSync(event, list(map(dict, pods)), list(map(dict, containers)), ())


def _synchronize(source: str, pods: Sequence[Any], containers: Sequence[Any], raw: bytes) -> Event:
    # Not from a runtime: no NRI version, so no capabilities to claim.
    return Event(
        name=EventName.SYNCHRONIZE,
        uid=f"{source}-{uuid.uuid4()}",
        runtime_name="nri-policy-server",
        runtime_version=source,
        budget_ms=0,
        pods=tuple(pod_of(p) for p in pods),
        containers=tuple(container_of(c) for c in containers),
        body=raw,
    )


def _entry_by_entry(
    source: str, pods: Sequence[Mapping[str, Any]], containers: Sequence[Mapping[str, Any]]
) -> NodeSync:
    skipped: list[Skipped] = []
    kept: dict[str, list[tuple[dict[str, Any], Any]]] = {"pods": [], "containers": []}
    for kind, entries, decoder in (("pods", pods, _POD), ("containers", containers, _CONTAINER)):
        for i, entry in enumerate(entries):
            decoded, problem = _entry(decoder, entry)
            if problem is None:
                kept[kind].append((dict(entry), decoded))
            else:
                skipped.append(_skipped(kind, i, entry, *problem))
    raw = orjson.dumps({k: [e for e, _ in v] for k, v in kept.items()})
    event = _synchronize(source, [d for _, d in kept["pods"]],
                         [d for _, d in kept["containers"]], raw)
    return NodeSync(event, [e for e, _ in kept["pods"]], [e for e, _ in kept["containers"]],
                    tuple(skipped))


def _entry(
    decoder: msgspec.json.Decoder[Any], entry: Mapping[str, Any]
) -> tuple[Any, tuple[str, str] | None]:
    """One entry decoded and checked: (it, None), or (None, (field, problem))."""
    try:
        raw = orjson.dumps(entry)
    except TypeError as exc:
        return None, ("", f"cannot be encoded as JSON ({exc})")
    try:
        decoded = _decode(decoder, raw)
    except _Refused as refused:
        return None, (_field(refused.loc[1:]), refused.message)
    found = refusal(decoded, walk_needed(raw))
    if found is not None:
        return None, (found.field(), found.message)
    return decoded, None


def _skipped(kind: str, index: int, entry: Any, field: str, message: str) -> Skipped:
    def text(key: str) -> str:
        value = entry.get(key) if isinstance(entry, Mapping) else None
        return value[:200] if isinstance(value, str) else ""

    pod = text("pod_sandbox_id") if kind == "containers" else text("id")
    return Skipped(kind, index, text("id"), text("name"), pod, field, message)


def _field_refused(found: FieldRefusal) -> _Refused:
    return _Refused(FIELD_REFUSED, ["body", *found.loc], found.text(), 400)


class _Refused(Exception):
    """What the decoder said of a body: the 422 (or 400) entry's ``type``, ``loc`` and
    ``msg``."""

    def __init__(
        self, kind: str, loc: list[str | int], message: str, status: int = 422
    ) -> None:
        super().__init__(message)
        self.kind, self.loc, self.message, self.status = kind, loc, message, status

    def error(self, event: str | None = None) -> RequestError:
        entry: dict[str, object] = {"type": self.kind, "loc": self.loc, "msg": self.message}
        return RequestError([entry], event, self.status)


def _decode(decoder: msgspec.json.Decoder[Any], raw: bytes) -> Any:
    try:
        return decoder.decode(raw)
    except msgspec.ValidationError as exc:
        message, at, path = str(exc).partition(_AT)
        limit = _too_long(message, path.rstrip("`"))
        if limit is None:
            raise _Refused("value_error", _loc(path.rstrip("`")) if at else _BODY,
                           message) from None
        raise _field_refused(limit) from None
    except (msgspec.DecodeError, ValueError) as exc:  # not JSON (ValueError: not UTF-8)
        raise _Refused("json_invalid", _BODY, str(exc)) from None
    except RecursionError:
        raise _Refused("json_invalid", _BODY, "JSON nested too deeply") from None


def _too_long(message: str, path: str) -> FieldRefusal | None:
    """The 400 for msgspec's refusal of a string over its field's length, else None."""
    too_long = _TOO_LONG.fullmatch(message)
    if too_long is None:
        return None
    text = f"is longer than {too_long.group(1)} characters"
    key = path.startswith(_KEY_AT)  # "key` in `$.pod.labels": a map's key
    loc = _loc(path.removeprefix(_KEY_AT))[1:]
    return FieldRefusal(tuple(loc), f"a key {text}" if key else text)


def _loc(path: str) -> list[str | int]:
    """msgspec's ``$.containers[3].linux`` -> ``["body", "containers", 3, "linux"]``."""
    loc: list[str | int] = ["body"]
    for match in _STEP.finditer(path):
        key, index = match.group(1), match.group(2)
        loc.append(key if key is not None else int(index) if index is not None else "...")
    return loc


def _sdk_problem(request: WebhookRequest) -> tuple[list[str | int], str] | None:
    """The first of the per-event rules (module docstring) the decoded request breaks."""
    name = EVENTS[request.event]
    read, required, foreign = _PAYLOAD_RULES[name]
    values = read(request)  # one call: the required keys' values, then the foreign keys'
    if values.count(None) == foreign and None not in values[:required]:
        return None  # every required key there, so every None is a foreign key's: none sent
    for key in REQUIRED_PAYLOAD[name]:
        if getattr(request, key) is None:
            return _BODY, f"Object missing required field `{key}` (required for {name})"
    for key in _FOREIGN[name]:
        if getattr(request, key) is not None:
            return _BODY, f"Object contains unknown field `{key}` (not carried by {name})"
    return None


# Per event, the payload keys it does not carry (the event's schema has no such property).
_FOREIGN: Mapping[str, tuple[str, ...]] = {
    event: tuple(k for k in request_structs.PAYLOAD_KEYS if k not in REQUEST_PAYLOAD[event])
    for event in REQUEST_PAYLOAD
}
# Per event, a reader of its required keys and then its foreign ones, and how many of each.
_PAYLOAD_RULES: Mapping[str, tuple[Any, int, int]] = {
    event: (attrgetter(*REQUIRED_PAYLOAD[event], *_FOREIGN[event]),
            len(REQUIRED_PAYLOAD[event]), len(_FOREIGN[event]))
    for event in REQUEST_PAYLOAD
}

def _field(loc: Iterable[str | int]) -> str:
    """``("containers", 3, "linux")`` -> ``containers[3].linux``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out

