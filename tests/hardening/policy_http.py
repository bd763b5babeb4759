"""Hostile policy servers for the hardening tests: raw HTTP/1.1 on asyncio streams.

A `RawPolicy` listens on a Unix socket or on loopback TCP (optionally TLS),
reads one request per connection (head and a content-length body) and hands it
to a *behaviour*: a coroutine that writes whatever bytes the test wants (a
valid reply, a lie about its size, a redirect, bytes trickled slower than the
budget) before the connection is closed. No HTTP framework sits in between,
so the bytes on the wire are exactly the ones a test names. Every request it
read is kept in `requests`.

Stopping closes the listener and every open connection and cancels behaviours
still running (a trickle never finishes on its own).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_HEAD_BYTES = 64 * 1024
STOP_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class HttpRequest:
    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


Behaviour = Callable[[HttpRequest, asyncio.StreamWriter], Awaitable[None]]
ReplyDoc = Any | Callable[[HttpRequest], Any]


def head(status: int, headers: Sequence[tuple[str, str]] = ()) -> bytes:
    lines = [f"HTTP/1.1 {status} X", "connection: close", *(f"{k}: {v}" for k, v in headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def reply(status: int = 200, body: bytes = b"", *, content_type: str = "application/json",
          length: bool = True, extra: Sequence[tuple[str, str]] = ()) -> Behaviour:
    """A whole reply; without `length` the body is delimited by closing the connection."""
    headers = [("content-type", content_type), *extra]
    if length:
        headers.append(("content-length", str(len(body))))

    async def behaviour(request: HttpRequest, writer: asyncio.StreamWriter) -> None:
        writer.write(head(status, headers) + body)
        await writer.drain()
    return behaviour


def json_reply(doc: ReplyDoc, status: int = 200) -> Behaviour:
    """`doc` as JSON; a callable gets the request first (e.g. to echo the container id)."""
    async def behaviour(request: HttpRequest, writer: asyncio.StreamWriter) -> None:
        value = doc(request) if callable(doc) else doc
        await reply(status, json.dumps(value).encode())(request, writer)
    return behaviour


def chunked(body: bytes, chunk_bytes: int = 64 * 1024) -> Behaviour:
    """`body` in chunked transfer encoding: the size is known only once it has all arrived."""
    async def behaviour(request: HttpRequest, writer: asyncio.StreamWriter) -> None:
        writer.write(head(200, [("content-type", "application/json"),
                                ("transfer-encoding", "chunked")]))
        for start in range(0, len(body), chunk_bytes):
            piece = body[start:start + chunk_bytes]
            writer.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
    return behaviour


def declared(length: int, sent: bytes = b"{") -> Behaviour:
    """Promise `length` bytes in content-length, send `sent`, then keep the connection open."""
    async def behaviour(request: HttpRequest, writer: asyncio.StreamWriter) -> None:
        writer.write(head(200, [("content-type", "application/json"),
                                ("content-length", str(length))]) + sent)
        await writer.drain()
        await asyncio.Event().wait()  # until the server stops
    return behaviour


def trickle(body: bytes, interval_s: float) -> Behaviour:
    """A valid reply, one byte every `interval_s` (head included): alive but too slow."""
    async def behaviour(request: HttpRequest, writer: asyncio.StreamWriter) -> None:
        data = head(200, [("content-type", "application/json"),
                          ("content-length", str(len(body)))]) + body
        for i in range(len(data)):
            writer.write(data[i:i + 1])
            await writer.drain()
            await asyncio.sleep(interval_s)
    return behaviour


def routes(table: dict[str, Behaviour]) -> Behaviour:
    """Dispatch on the request path; an unknown path gets 404."""
    async def behaviour(request: HttpRequest, writer: asyncio.StreamWriter) -> None:
        await table.get(request.path, reply(404, b"no such path"))(request, writer)
    return behaviour


class RawPolicy:
    def __init__(self, behaviour: Behaviour, ssl_context: ssl.SSLContext | None = None) -> None:
        self.behaviour = behaviour
        self.ssl_context = ssl_context
        self.requests: list[HttpRequest] = []
        self.broken_connections = 0
        self.port = 0  # after start_tcp
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def start_unix(self, path: Path) -> None:
        self._server = await asyncio.start_unix_server(self._serve, path=str(path))

    async def start_tcp(self) -> int:
        """Listen on 127.0.0.1; returns the port."""
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0,
                                                  ssl=self.ssl_context)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()
        for task in list(self._tasks):
            task.cancel()
        async with asyncio.timeout(STOP_TIMEOUT_S):
            await asyncio.gather(*self._tasks, return_exceptions=True)
            if self._server is not None:
                await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        try:
            request = await _read_request(reader)
            if request is not None:
                self.requests.append(request)
                await self.behaviour(request, writer)
        except (ConnectionError, ssl.SSLError):
            self.broken_connections += 1  # the peer gave up or refused us; nothing to answer
        except asyncio.CancelledError:
            pass  # aclose() stops a behaviour that never ends; asyncio's callback would log it
        finally:
            self._writers.discard(writer)
            self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1.0)


async def _read_request(reader: asyncio.StreamReader) -> HttpRequest | None:
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        return None
    if len(raw) > MAX_HEAD_BYTES:
        return None
    first, *lines = raw.decode("latin-1").split("\r\n")
    method, path, _ = first.split(" ", 2)
    headers = {}
    for line in lines:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return HttpRequest(method, path, headers, body)
