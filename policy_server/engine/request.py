"""The one request decoder: webhook request bytes -> the SDK's ``Event``, or the 422 that says why.

The request is declared once for decoding: the contract's msgspec Structs
(``bridge.contract.request_structs``, every NRI message built from the proto descriptors), with
ValidateContainerAdjustment's keys added here (``WebhookRequest``). ``parse_request`` decodes a
body with it, once, in strict JSON types (no ``"5"`` for an integer, no ``1`` for a boolean,
unknown keys refused), and the ``Event`` is built from the Structs by attribute reads
(``engine.request_event``; for a policy that reads only the body, its envelope alone). A body it
refuses gets a 422 whose detail is msgspec's own: its message, and its path as ``loc``
(``$.container.linux`` -> ``["body", "container", "linux"]``; ``"..."`` stands for a map's key,
which msgspec does not name). Three rules the SDK adds are checked after decoding, worded the
same way: ``api_version`` must be present, ``pod`` / ``container`` must be there for the events
that carry them, and a container ``state`` is its enum name, not its number. docs/webhooks.md
("Refused requests") is the contract.

``synchronize_event`` builds the Synchronize the server sends itself (resync, the node
reconciler) from the bridge's state, with the same Structs and the same conversion.

Owns the request's shape for the policy server: which bodies are refused, with which error.
Must not import web frameworks, do I/O, or evaluate anything.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any

import msgspec
import orjson

from bridge.contract import request_structs
from bridge.contract.catalogue import API_VERSION, CONTAINER_EVENTS, EventName
from bridge.contract.request_structs import nri_struct
from bridge.contract.webhook_models import Removals as RemovalsModel
from policy_server.engine.request_event import EVENTS, container_of, event_of, pod_of
from policy_server.exceptions import PayloadError, RequestError
from policy_server.sdk.model import Event

Removals: Any = msgspec.defstruct(
    "Removals",
    [(name, list[str] | None, None) for name in RemovalsModel.model_fields],
    forbid_unknown_fields=True,
    module=__name__,
)
_LinuxContainerUpdate: Any = nri_struct("LinuxContainerUpdate")
_OwningPlugins: Any = nri_struct("OwningPlugins")
_PluginInstance: Any = nri_struct("PluginInstance")


class Adjustment(nri_struct("ContainerAdjustment")):  # type: ignore[misc]
    """ValidateContainerAdjustment's merged ``adjust``: a ContainerAdjustment plus removals."""

    remove: Removals | None = None


class Update(msgspec.Struct, forbid_unknown_fields=True):
    container_id: Annotated[str, msgspec.Meta(min_length=1)]
    linux: _LinuxContainerUpdate | None = None
    ignore_failure: bool | None = None


class WebhookRequest(request_structs.Request, forbid_unknown_fields=True):
    """What the bridge POSTs for one NRI event, ValidateContainerAdjustment's keys included."""

    adjust: Adjustment | None = None
    update: list[Update] | None = None
    owners: _OwningPlugins | None = None
    plugins: list[_PluginInstance] | None = None


_REQUEST = msgspec.json.Decoder(WebhookRequest)
_STATE = msgspec.json.Decoder(request_structs.State)
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
    return event_of(request, raw, payload)


def synchronize_event(
    source: str, pods: Sequence[Mapping[str, Any]], containers: Sequence[Mapping[str, Any]]
) -> Event:
    """The Synchronize the server sends itself (``source``: ``resync``, ``reconcile``) for the
    bridge's pods and containers (webhook JSON shape); raises ``PayloadError`` naming the
    first entry refused."""
    raw = orjson.dumps({"pods": pods, "containers": containers})
    try:
        state = _decode(_STATE, raw)
    except _Refused as refused:
        raise PayloadError(_field(refused.loc[1:]), refused.message) from None
    for i, container in enumerate(state.containers):
        if _state_is_a_number(container):
            raise PayloadError(f"containers[{i}].state", "Expected `str`, got `int`")
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


class _Refused(Exception):
    """What the decoder said of a body: the 422 entry's ``type``, ``loc`` and ``msg``."""

    def __init__(self, kind: str, loc: list[str | int], message: str) -> None:
        super().__init__(message)
        self.kind, self.loc, self.message = kind, loc, message

    def error(self, event: str | None = None) -> RequestError:
        return RequestError([{"type": self.kind, "loc": self.loc, "msg": self.message}], event)


def _decode(decoder: msgspec.json.Decoder[Any], raw: bytes) -> Any:
    try:
        return decoder.decode(raw)
    except msgspec.ValidationError as exc:
        message, at, path = str(exc).partition(_AT)
        raise _Refused("value_error", _loc(path.rstrip("`")) if at else _BODY, message) from None
    except (msgspec.DecodeError, ValueError) as exc:  # not JSON (ValueError: not UTF-8)
        raise _Refused("json_invalid", _BODY, str(exc)) from None
    except RecursionError:
        raise _Refused("json_invalid", _BODY, "JSON nested too deeply") from None


def _loc(path: str) -> list[str | int]:
    """msgspec's ``$.containers[3].linux`` -> ``["body", "containers", 3, "linux"]``."""
    loc: list[str | int] = ["body"]
    for match in _STEP.finditer(path):
        key, index = match.group(1), match.group(2)
        loc.append(key if key is not None else int(index) if index is not None else "...")
    return loc


def _sdk_problem(request: WebhookRequest) -> tuple[list[str | int], str] | None:
    """The first of the SDK's own rules (module docstring) the decoded request breaks."""
    if request.api_version is request_structs.ABSENT:
        return _BODY, f"Object missing required field `api_version` ({API_VERSION!r})"
    name = EVENTS[request.event]
    if request.pod is None and name is not EventName.SYNCHRONIZE:
        return _BODY, f"Object missing required field `pod` (required for {name})"
    if request.container is None and name in CONTAINER_EVENTS:
        return _BODY, f"Object missing required field `container` (required for {name})"
    if request.container is not None and _state_is_a_number(request.container):
        return ["body", "container", "state"], "Expected `str`, got `int`"
    for i, container in enumerate(request.containers or ()):
        if _state_is_a_number(container):
            return ["body", "containers", i, "state"], "Expected `str`, got `int`"
    return None


def _state_is_a_number(container: Any) -> bool:
    return container.state is not None and type(container.state) is not str


def _field(loc: Iterable[str | int]) -> str:
    """``("containers", 3, "linux")`` -> ``containers[3].linux``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out

