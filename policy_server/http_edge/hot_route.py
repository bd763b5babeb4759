"""The hot route, ``POST /v1/policies/{name}``: request bytes in, status and reply bytes out.

The bridge calls this once per NRI event while the runtime waits, so it is the one route
written for latency, and the only one for this path (the FastAPI app declares it for the
OpenAPI document only). The body becomes the SDK's ``Event`` by the one request decoder
(``engine.request.parse_request``, or a 422 / 400 naming the field; without its typed payload when
nothing will read it: ``Engine.needs_payload``), ``PolicyServer.handle`` decides
and settles the decision, and the settled reply is encoded once (``Settled.body``) and
sent as it is: the server does not check its own output again (the bridge checks every reply).
``HotRoute`` serves it as plain ASGI in front of the FastAPI app: its middleware, routing,
dependency solving and per-request objects cost more than the route itself
(docs/performance.md#numbers-behind-the-code). Owns no policy logic (that is
``PolicyServer.handle``) and no other route.
"""

from __future__ import annotations

import contextlib
from typing import Any

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

from bridge.process_setup.gc_pause import paused_gc
from policy_server.engine.request import parse_request
from policy_server.exceptions import RequestError, UnknownPolicyError
from policy_server.service import PolicyServer

PREFIX = "/v1/policies/"
# A body this large holds many pods (a Synchronize, ~4 KB a pod and container); an event about
# one container is a few KB.
BULK_BODY_BYTES = 256 << 10
_JSON = b"application/json"
_NO_PAUSE = contextlib.nullcontext()


def _detail(status: int, detail: Any) -> tuple[int, bytes]:
    return status, orjson.dumps({"detail": detail})


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
    try:  # a bad body is a 422 (400) before an unknown name is a 404
        event = parse_request(raw, server.engine.needs_payload(name))
    except RequestError as exc:
        server.refused(name, exc)
        return _detail(exc.status, exc.detail)
    try:
        settled = await server.handle(name, event)
    except UnknownPolicyError:
        return _unknown(server, name)
    return 200, settled.body()


def _unknown(server: PolicyServer, name: str) -> tuple[int, bytes]:
    known = ", ".join(p.name for p in server.registry)
    return _detail(404, f"no policy named {name!r} (known: {known})")


class HotRoute:
    """ASGI app: serves ``/v1/policies/{name}`` itself (POST; 405 for any other method), passes
    everything else to ``app``."""

    def __init__(self, app: ASGIApp, server: PolicyServer) -> None:
        self.app = app
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        name = path[len(PREFIX) :] if scope["type"] == "http" and path.startswith(PREFIX) else ""
        if not name or "/" in name:
            await self.app(scope, receive, send)
            return
        headers = [(b"content-type", _JSON)]
        if scope["method"] != "POST":
            # This path is POST only (the FastAPI app only documents it): answered as its
            # router would, 405 naming the method allowed.
            status, body = _detail(405, "Method Not Allowed")
            headers.append((b"allow", b"POST"))
            await _answer(send, scope, status, body, headers)
            return
        content_type = None
        for key, value in scope["headers"]:
            if key == b"content-type":
                content_type = value.decode("latin-1")
        if not is_json(content_type):
            status, body = _detail(
                415, f"expected content-type application/json, got {content_type!r}"
            )
            await _answer(send, scope, status, body, headers)
            return
        raw = await _read(receive)
        if raw is None:
            return  # the client went away mid-body: nobody to answer
        # A body the size of the node: the collector waits until the answer has left (its first
        # young collection walks everything the request left alive; bridge.process_setup.gc_pause).
        with paused_gc() if len(raw) >= BULK_BODY_BYTES else _NO_PAUSE:
            status, body = await evaluate_body(self.server, name, raw)
            await _answer(send, scope, status, body, headers)


async def _answer(
    send: Send, scope: Scope, status: int, body: bytes, headers: list[tuple[bytes, bytes]]
) -> None:
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})


async def _read(receive: Receive) -> bytes | None:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)
