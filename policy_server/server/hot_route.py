"""The hot route, ``POST /v1/policies/{name}``: request bytes in, status and reply bytes out.

The bridge calls this once per NRI event while the runtime waits, so it is the one route
written for latency. A body is validated once: pydantic parses the bytes straight into the
contract's ``WebhookRequest`` in strict mode, the engine's frozen event is built from that
model (``contract_event``, no second parse), evaluated, checked against ``WebhookReply`` and
encoded once (orjson). A body strict mode refuses, or one the engine's parser would read
differently (``contract_event`` says which), takes the checked path instead: orjson, the
contract in pydantic's lax mode (a 422 names the field exactly as FastAPI would), then the
engine's ``parse_event`` (a 422 naming the field), so every answer, errors included, is the
one that path gives. ``HotRoute`` serves it as plain ASGI in front of the FastAPI app: its
middleware, routing, dependency solving and per-request objects (~100 µs per request on the
reference machine, docs/performance.md); the FastAPI route of the same path calls the same
``evaluate_body`` and exists for the OpenAPI docs. Owns no policy logic (that is
``PolicyServer.handle_event``) and no other route.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import orjson
from pydantic import ValidationError
from starlette.types import ASGIApp, Receive, Scope, Send

from bridge.contract import WebhookReply, WebhookRequest
from bridge.contract.checked import MAX_ENTRIES, CheckedReplies
from policy_server.engine.evaluate import Evaluation
from policy_server.engine.request import event_from_contract
from policy_server.exceptions import PayloadError, UnknownPolicyError
from policy_server.request_service import PolicyServer

log = logging.getLogger(__name__)

PREFIX = "/v1/policies/"
_JSON = b"application/json"


_INDEX = re.compile(r"^(.*)\[(\d+)\]$")


def field_loc(field: str) -> list[str | int]:
    """``containers[3].linux.resources`` -> ``["body", "containers", 3, "linux", "resources"]``."""
    loc: list[str | int] = ["body"]
    for part in field.split("."):
        match = _INDEX.match(part)
        if match:
            loc.extend([match.group(1), int(match.group(2))])
        else:
            loc.append(part)
    return loc


def _dumps(value: Any) -> bytes:
    # default=str: pydantic error contexts may hold exception objects.
    return orjson.dumps(value, default=str)


def _detail(status: int, detail: Any) -> tuple[int, bytes]:
    return status, _dumps({"detail": detail})


def is_json(content_type: str | None) -> bool:
    """No content type, ``application/json`` or ``application/<anything>+json``."""
    if not content_type:
        return True
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


async def evaluate_body(server: PolicyServer, name: str, raw: bytes) -> tuple[int, bytes]:
    """The whole route: the HTTP status and JSON body answering ``raw`` POSTed to ``name``."""
    try:
        request = WebhookRequest.model_validate_json(raw, strict=True)
    except ValueError:  # ValidationError, or anything else the parser refuses
        return await evaluate_checked(server, name, raw)
    event = event_from_contract(request)
    if event is None:
        return await evaluate_checked(server, name, raw)
    try:
        evaluation = await server.handle_event(name, event)
    except UnknownPolicyError:
        return _unknown(server, name)
    return _reply(name, evaluation)


async def evaluate_checked(server: PolicyServer, name: str, raw: bytes) -> tuple[int, bytes]:
    """The checked path (the whole route before the strict pass): orjson, the contract in lax
    mode, ``parse_event``; each step's 422 names the field. ``evaluate_body`` hands it every
    body the strict pass refuses, so the few that lax mode and the engine both take (``1`` for
    a boolean only the contract reads) are still answered."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return _detail(
            422,
            [
                {
                    "type": "json_invalid",
                    "loc": ["body", exc.pos],
                    "msg": "JSON decode error",
                    "input": {},
                    "ctx": {"error": exc.msg},
                }
            ],
        )
    try:
        WebhookRequest.model_validate(data)
    except ValidationError as exc:
        return _detail(
            422,
            [{**error, "loc": ["body", *error["loc"]]} for error in exc.errors(include_url=False)],
        )
    try:
        evaluation = await server.handle(name, data)
    except UnknownPolicyError:
        return _unknown(server, name)
    except PayloadError as exc:
        return _detail(
            422, [{"loc": field_loc(exc.field), "msg": exc.message, "type": "value_error"}]
        )
    return _reply(name, evaluation)


def _unknown(server: PolicyServer, name: str) -> tuple[int, bytes]:
    known = ", ".join(p.name for p in server.registry)
    return _detail(404, f"no policy named {name!r} (known: {known})")


# Reply bodies already checked against WebhookReply (bridge.contract.checked): the check
# costs ~4 µs in a micro-benchmark but ~18 µs per request under load (its validator is cold).
MAX_CHECKED = MAX_ENTRIES
_CHECKED: CheckedReplies[bytes, bool] = CheckedReplies(MAX_CHECKED)


def _reply(name: str, evaluation: Evaluation) -> tuple[int, bytes]:
    body = orjson.dumps(evaluation.reply)
    if _CHECKED.get(body):
        return 200, body
    try:
        WebhookReply.model_validate_json(body)
    except ValidationError as exc:
        log.error(
            "policy=%s produced a reply outside the contract: %s reply=%s",
            name,
            exc,
            evaluation.reply,
        )
        return _detail(500, f"policy {name!r} produced an invalid reply: {exc.errors()[:3]}")
    _CHECKED.remember(body, body, True)
    return 200, body


class HotRoute:
    """ASGI app: serves ``POST /v1/policies/{name}`` itself, passes everything else to ``app``."""

    def __init__(self, app: ASGIApp, server: PolicyServer) -> None:
        self.app = app
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        name = path[len(PREFIX) :] if scope["type"] == "http" and path.startswith(PREFIX) else ""
        if not name or "/" in name or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        content_type = None
        for key, value in scope["headers"]:
            if key == b"content-type":
                content_type = value.decode("latin-1")
        if not is_json(content_type):
            status, body = _detail(
                415, f"expected content-type application/json, got {content_type!r}"
            )
        else:
            raw = await _read(receive)
            if raw is None:
                return  # the client went away mid-body: nobody to answer
            status, body = await evaluate_body(self.server, name, raw)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", _JSON), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})


async def _read(receive: Receive) -> bytes | None:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)
