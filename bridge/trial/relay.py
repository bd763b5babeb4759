"""A recording relay between the bridge and its webhooks, for `nri-webhook-bridge try`.

Owns: one Unix-socket HTTP server (uvicorn, as the control API) that takes the bridge's
POSTs for every configured webhook, forwards each to the real webhook with the bridge's own
policy client (same TLS, token, timeouts), records the request body exactly as the bridge
sent it with the reply or failure, and answers the bridge with the webhook's reply bytes.
The bridge's config is rewritten to point each webhook at the relay (play.relayed_document).
Must not: change a body or a reply, or decide anything about them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from bridge.control.serving import ControlServer, wait_started
from bridge.control.settings import ControlSettings
from bridge.webhooks.client import PolicyClient
from bridge.webhooks.failures import WebhookFailure
from bridge.webhooks.specs import WebhookSpec

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
# The relay forwards within the budget the bridge gave the call, plus this for the hop.
RELAY_SLACK_S = 0.05
FALLBACK_BUDGET_S = 2.0


@dataclass(frozen=True, slots=True)
class Exchange:
    """One webhook call: the body as POSTed, and the reply (or why there is none)."""

    webhook: str
    request: dict[str, Any]
    reply: dict[str, Any] | None
    error: str | None = None

    @property
    def event(self) -> str:
        return str(self.request.get("event", ""))


class Relay:
    """See the module docstring. `exchanges` grows as calls complete, in order."""

    def __init__(self, webhooks: tuple[WebhookSpec, ...], socket_path: str) -> None:
        self.socket_path = socket_path
        self.webhooks = webhooks
        self.exchanges: list[Exchange] = []
        self._clients = [PolicyClient(spec) for spec in webhooks]
        self._server = ControlServer(self, ControlSettings(socket_path=socket_path,
                                                           explicit_socket=True,
                                                           socket_mode=0o600))

    async def start(self) -> None:
        self._server.open()
        loop = asyncio.get_running_loop()
        self._task: asyncio.Task[None] = loop.create_task(self._server.serve(), name="relay")
        await wait_started(self._server)

    async def stop(self) -> None:
        self._server.stop()
        await self._task
        for client in self._clients:
            await client.aclose()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        try:
            index = int(scope["path"].strip("/"))
            spec, client = self.webhooks[index], self._clients[index]
        except (ValueError, IndexError):
            await _answer(send, 404, b'{"error":"no such webhook"}')
            return
        request = json.loads(body)
        budget_s = request.get("budget_ms", FALLBACK_BUDGET_S * 1000) / 1000 + RELAY_SLACK_S
        try:
            raw = await client.post_raw(body, budget_s)
        except WebhookFailure as failure:
            self.exchanges.append(Exchange(spec.name, request, None, str(failure)))
            await _answer(send, 502, json.dumps({"error": str(failure)}).encode())
            return
        try:
            reply = json.loads(raw)
        except ValueError:
            reply = None
        self.exchanges.append(Exchange(spec.name, request, reply if isinstance(reply, dict)
                                       else None, None if isinstance(reply, dict)
                                       else "reply is not a JSON object"))
        await _answer(send, 200, raw)


async def _answer(send: Send, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
