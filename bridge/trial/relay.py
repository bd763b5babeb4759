"""A recording relay between the bridge and its webhooks, for `nri-webhook-bridge try`.

Owns: one Unix-socket HTTP server (uvicorn, as the control API) that takes the bridge's
POSTs for every configured webhook, forwards each to the real webhook with the bridge's own
policy client (same TLS, token, timeouts), records the request body as forwarded with the
reply or failure, and answers the bridge with the webhook's reply bytes. Two envelope fields
are the relay's, so that a trial is safe against a live server and reproducible:
`dry_run` is always true (the policy server answers from its dry-run copy of its state and
changes nothing), and `uid` is derived from what the request is about (webhook, event, pod
namespace/name, container name, occurrence) instead of the bridge's random one.
The bridge's config is rewritten to point each webhook at the relay (play.relayed_document).
Must not: change anything else in a body or a reply, or decide anything about them.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
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
# The envelope's first fields, in the order bridge.contract.request_body.envelope writes them.
_ENVELOPE = re.compile(
    rb'^(\{"api_version":"[^"]*","uid":)"[0-9a-f]*"(.*?,"dry_run":)(?:true|false)', re.DOTALL)


@dataclass(frozen=True, slots=True)
class Exchange:
    """One webhook call: the body as POSTed, and the reply (or why there is none)."""

    webhook: str
    request: dict[str, Any]  # as forwarded: dry_run true, the derived uid
    reply: dict[str, Any] | None
    error: str | None = None
    shadow: bool = False  # the bridge sent it as a dry run: a `mode: shadow` webhook
    bridge_uid: str = ""  # the uid the bridge gave it (its log names the call by it)

    @property
    def event(self) -> str:
        return str(self.request.get("event", ""))


class Relay:
    """See the module docstring. `exchanges` grows as calls complete, in order."""

    def __init__(self, webhooks: tuple[WebhookSpec, ...], socket_path: str) -> None:
        self.socket_path = socket_path
        self.webhooks = webhooks
        self.exchanges: list[Exchange] = []
        self._seen: dict[str, int] = {}  # uid derivation key -> occurrences so far
        self._clients = [PolicyClient(spec) for spec in webhooks]
        self._server = ControlServer(self, ControlSettings(socket_path=socket_path,
                                                           explicit_socket=True,
                                                           socket_mode=0o600))

    def begin(self) -> None:
        """A new trial starts: uids are derived from its own calls alone (the same in every
        run, whatever trials came before through this relay)."""
        self._seen.clear()

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
        sent = json.loads(body)
        uid = self._uid(index, sent)
        body = _ENVELOPE.sub(lambda m: m[1] + json.dumps(uid).encode() + m[2] + b"true",
                             body, count=1)
        request = json.loads(body)
        if request.get("uid") != uid or request.get("dry_run") is not True:
            raise AssertionError("the bridge's request envelope changed its layout")
        shadow, bridge_uid = sent.get("dry_run") is True, str(sent.get("uid", ""))
        budget_s = request.get("budget_ms", FALLBACK_BUDGET_S * 1000) / 1000 + RELAY_SLACK_S
        try:
            raw = await client.post_raw(body, budget_s)
        except WebhookFailure as failure:
            self.exchanges.append(Exchange(spec.name, request, None, str(failure),
                                           shadow, bridge_uid))
            await _answer(send, 502, json.dumps({"error": str(failure)}).encode())
            return
        try:
            reply = json.loads(raw)
        except ValueError:
            reply = None
        self.exchanges.append(Exchange(spec.name, request, reply if isinstance(reply, dict)
                                       else None, None if isinstance(reply, dict)
                                       else "reply is not a JSON object", shadow, bridge_uid))
        await _answer(send, 200, raw)

    def _uid(self, index: int, request: dict[str, Any]) -> str:
        """32 hex digits from what the request is about, the same in every run."""
        pod = request.get("pod") or {}
        ctr = request.get("container") or {}
        key = (f"{index}|{request.get('event')}|{pod.get('namespace', '')}/{pod.get('name', '')}"
               f"|{ctr.get('name', '')}")
        n = self._seen[key] = self._seen.get(key, 0) + 1
        return hashlib.sha256(f"{key}|{n}".encode()).hexdigest()[:32]


async def _answer(send: Send, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
