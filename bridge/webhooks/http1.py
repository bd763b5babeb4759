"""One HTTP/1.1 connection to a policy: one request out, one reply parsed back, then reuse.

The bytes coming back are parsed by httptools (llhttp, the parser Node.js ships and uvicorn
uses on the server side): status line, headers, Content-Length and chunked framing, keep-alive.
This module is only the glue between that parser and an asyncio transport, plus the limits the
webhook path needs while the reply streams in: a body cap, identity encoding only, and just
enough of a non-2xx page for a log line. Why not a general client library: aiohttp's client
spends about three times the CPU of this glue per 4 KB POST on a Unix socket, and the webhook
path pays that once per NRI event while the runtime waits
(docs/performance.md#numbers-behind-the-code).

Owns: writing one request, parsing its reply, and saying whether the connection can carry the
next one. Must not: open connections, know budgets or JSON (client.py), retry anything.
"""

from __future__ import annotations

import asyncio
from typing import cast

import httptools

from bridge.webhooks.failures import FailureKind, WebhookFailure

MAX_ERROR_HEAD = 512  # bytes of a non-2xx page kept for the log line


class Unanswered(Exception):
    """The connection closed before any byte of a reply arrived."""


class Http1Connection(asyncio.Protocol):
    """An asyncio protocol: `exchange()` one request at a time; `reusable` afterwards."""

    def __init__(self, reply_cap: int) -> None:
        self._cap = reply_cap
        self._parser = httptools.HttpResponseParser(self)
        self._transport: asyncio.Transport | None = None
        self._waiter: asyncio.Future[bytes] | None = None
        self._closed = False
        self._keep_alive = True
        self.idle_since = 0.0  # time.monotonic() when its last exchange ended (the pool's)
        self._reset()

    def _reset(self) -> None:
        self._status = 0
        self._chunks: list[bytes] = []
        self._size = 0
        self._received = False  # any byte of this exchange's reply
        self._length: int | None = None  # declared Content-Length
        self._framed = False  # Content-Length or chunked: the end is not the close
        self._encoding = b"identity"

    # -- used by the pool --------------------------------------------------------------

    @property
    def reusable(self) -> bool:
        transport = self._transport
        return (not self._closed and self._keep_alive and self._waiter is None
                and transport is not None and not transport.is_closing())

    def close(self) -> None:
        self._closed = True
        if self._transport is not None:
            self._transport.abort()  # nothing of ours is worth flushing: drop it now

    async def exchange(self, request: bytes) -> bytes:
        """Send `request` (head and body); the body of a 2xx reply, else WebhookFailure.

        Unanswered if the connection closed before any byte of a reply came back."""
        if self._transport is None or self._closed:
            raise Unanswered()
        self._reset()
        waiter: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._waiter = waiter
        self._transport.write(request)
        try:
            return await waiter
        finally:
            # Cancelled (the budget ran out; cancelling the task cancels the waiter too): the
            # reply may still come, and must not answer the next request.
            if waiter.cancelled() or not waiter.done():
                self.close()
            self._waiter = None

    # -- asyncio.Protocol --------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (uvloop's are not asyncio.Transport subclasses).
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self._waiter is None:
            self.close()  # bytes nobody asked for: this connection is out of step
            return
        self._received = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(FailureKind.TRANSPORT, "the policy switched protocols")
        except httptools.HttpParserError as exc:
            self._fail(FailureKind.TRANSPORT, f"invalid HTTP reply: {exc}")

    def eof_received(self) -> bool | None:
        self._closed = True  # never reused from now on, even before connection_lost
        return None  # half-closed is closed: the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        if self._waiter is None or self._waiter.done():
            return
        if not self._received:
            self._waiter.set_exception(Unanswered())
        elif self._status and not self._framed and self._status >= 200:
            self._complete()  # no Content-Length, not chunked: the body ends at the close
        else:
            why = f": {exc}" if exc else ""
            self._fail(FailureKind.TRANSPORT, f"connection closed in the middle of the reply{why}")

    # -- httptools callbacks -----------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"content-length":
            self._framed = True
            self._length = int(value) if value.strip().isdigit() else None
        elif name == b"transfer-encoding":
            self._framed = True
        elif name == b"content-encoding":
            self._encoding = value.strip().lower()

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200 and status != 101:
            return  # an interim reply (102, 103, an unasked-for 100): the real one follows
        self._status = status
        if not 200 <= status < 300:
            if self._encoding != b"identity":
                self._fail_status(b"")  # an encoded page: nothing readable to quote
            return
        if self._encoding != b"identity":
            self._fail(FailureKind.INVALID_JSON, f"reply has content-encoding "
                       f"{self._encoding.decode('latin-1')[:40]!r}; only identity is accepted")
        elif self._length is not None and self._length > self._cap:
            self._fail(FailureKind.TOO_LARGE, f"reply of {self._length} bytes exceeds {self._cap}")

    def on_body(self, body: bytes) -> None:
        if self._waiter is None or self._waiter.done():
            return
        self._size += len(body)
        self._chunks.append(body)
        if not 200 <= self._status < 300:
            if self._size >= MAX_ERROR_HEAD:
                self._fail_status(b"".join(self._chunks)[:MAX_ERROR_HEAD])
        elif self._size > self._cap:
            self._fail(FailureKind.TOO_LARGE, f"reply exceeds {self._cap} bytes")

    def on_message_complete(self) -> None:
        if not self._status:  # the interim reply's headers do not carry over
            self._length, self._framed, self._encoding = None, False, b"identity"
            return
        self._keep_alive = self._parser.should_keep_alive()
        self._complete()

    # -- outcomes ----------------------------------------------------------------------

    def _complete(self) -> None:
        waiter = self._waiter
        if waiter is None or waiter.done():
            self.close()  # a second reply to one request
            return
        body = b"".join(self._chunks)
        if 200 <= self._status < 300:
            waiter.set_result(body)
        else:
            self._fail_status(body[:MAX_ERROR_HEAD])

    def _fail_status(self, head: bytes) -> None:
        self._fail(FailureKind.HTTP_STATUS, f"HTTP {self._status}: "
                   f"{head.decode(errors='replace').strip()[:200]}")

    def _fail(self, kind: FailureKind, reason: str) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(WebhookFailure(kind, reason))
        self.close()  # the rest of this reply is of no use, and it is not consumed
