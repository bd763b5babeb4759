"""A policy service double for the webhook tests: a real HTTP server in the test's event loop.

The bridge's webhook client is the real one over a real Unix socket (or TCP), talking to a
real HTTP server (aiohttp's); only the policy is scripted. Each route answers with a fixed
`Reply` or a function of the request, and records what it received, so a test asserts on the
bytes and headers the bridge sent.
"""

from __future__ import annotations

import json
import socket
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web


@dataclass(frozen=True)
class Reply:
    status: int = 200
    json: Any = None
    body: bytes = b""

    def response(self) -> web.Response:
        if self.json is not None:
            return web.Response(status=self.status, body=json.dumps(self.json).encode(),
                                content_type="application/json")
        return web.Response(status=self.status, body=self.body or None,
                            content_type="application/json" if self.body else None)


@dataclass(frozen=True)
class Seen:
    """One request the double received."""

    path_qs: str
    headers: dict[str, str]
    content: bytes

    def json(self) -> Any:
        return json.loads(self.content)


Answer = Reply | Callable[[Seen], Awaitable[Reply]]


@dataclass
class Route:
    answer: Answer
    calls: list[Seen] = field(default_factory=list)

    @property
    def called(self) -> bool:
        return bool(self.calls)


class PolicyDouble:
    """Routes by path (query included); an unrouted request gets 404."""

    def __init__(self, sock: Path) -> None:
        self.sock = sock
        self.port = 0  # with tcp=True
        self.routes: dict[str, Route] = {}

    def url(self, path: str = "/v1/policy") -> str:
        return f"unix://{self.sock}{path}"

    def route(self, path: str, answer: Answer) -> Route:
        self.routes[path] = route = Route(answer)
        return route

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        route = self.routes.get(request.path_qs)
        if route is None:
            return web.Response(status=404, text="no route")
        seen = Seen(request.path_qs, dict(request.headers), await request.read())
        route.calls.append(seen)
        answer = route.answer
        reply = answer if isinstance(answer, Reply) else await answer(seen)
        return reply.response()


@asynccontextmanager
async def policy_double(tcp: bool = False) -> AsyncIterator[PolicyDouble]:
    """A running double on a fresh Unix socket (or 127.0.0.1, port in `double.port`)."""
    with tempfile.TemporaryDirectory(prefix="nwb-double-", dir="/tmp") as tmp:
        double = PolicyDouble(Path(tmp) / "policy.sock")
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", double._handle)
        # handler_cancellation: a call the client gave up on stops here too (a sleeping
        # answer must not hold the test's teardown).
        runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.5,
                               access_log=None)
        await runner.setup()
        site: web.BaseSite
        if tcp:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.bind(("127.0.0.1", 0))
            double.port = listener.getsockname()[1]
            site = web.SockSite(runner, listener)
        else:
            site = web.UnixSite(runner, str(double.sock))
        await site.start()
        try:
            yield double
        finally:
            await runner.cleanup()


@contextmanager
def refusing_socket() -> Iterator[str]:
    """The path of a Unix socket that is bound but not listening: connecting is refused."""
    with tempfile.TemporaryDirectory(prefix="nwb-refuse-", dir="/tmp") as tmp, \
            socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(f"{tmp}/refuse.sock")
        yield f"{tmp}/refuse.sock"
