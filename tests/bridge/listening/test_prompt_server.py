"""bridge.listening.prompt_server: a real uvicorn server on a Unix socket stops when asked, with
and without open connections, and the uvicorn internals it leans on are still there."""

from __future__ import annotations

import asyncio
import inspect
import socket
from pathlib import Path

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from bridge.listening.prompt_server import PromptServer
from tests.waiting import until


def _app(started: asyncio.Event, release: asyncio.Event) -> Starlette:
    async def slow(request: Request) -> PlainTextResponse:
        started.set()
        await release.wait()
        return PlainTextResponse("done")

    async def fast(request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    return Starlette(routes=[Route("/slow", slow), Route("/fast", fast)])


def _listening(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.listen(8)
    sock.setblocking(False)
    return sock


def _server(app: Starlette, *, date_header: bool = False) -> PromptServer:
    return PromptServer(uvicorn.Config(app, lifespan="off", log_config=None, access_log=False,
                                       date_header=date_header))


async def _serving(server: PromptServer, sock: socket.socket) -> asyncio.Task[None]:
    task = asyncio.create_task(server.serve(sockets=[sock]))
    await until(lambda: server.started or task.done(), what="the server serves", timeout_s=10)
    assert not task.done()
    return task


async def test_an_idle_server_returns_from_serve_once_asked(tmp_path: Path) -> None:
    server = _server(_app(asyncio.Event(), asyncio.Event()))
    task = await _serving(server, _listening(tmp_path / "s.sock"))
    await asyncio.sleep(0)
    assert not task.done()  # it serves until asked: no exit of its own
    server.request_exit()
    async with asyncio.timeout(10):
        await task
    assert server.should_exit


async def test_an_unforced_exit_lets_the_open_request_finish(tmp_path: Path) -> None:
    started, release = asyncio.Event(), asyncio.Event()
    server = _server(_app(started, release))
    path = tmp_path / "s.sock"
    task = await _serving(server, _listening(path))
    async with httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=str(path))) as client:
        request = asyncio.create_task(client.get("http://s/slow"))
        await started.wait()
        server.request_exit()
        await asyncio.sleep(0.05)
        assert not task.done()  # the open request holds the shutdown
        release.set()
        reply = await request
        async with asyncio.timeout(10):
            await task
    assert reply.status_code == 200 and reply.text == "done"


async def test_a_forced_exit_does_not_wait_for_an_open_request(tmp_path: Path) -> None:
    started, release = asyncio.Event(), asyncio.Event()
    server = _server(_app(started, release))
    path = tmp_path / "s.sock"
    task = await _serving(server, _listening(path))
    async with httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=str(path))) as client:
        request = asyncio.create_task(client.get("http://s/slow"))
        await started.wait()
        server.request_exit(force=True)
        async with asyncio.timeout(10):
            await task  # returns with the request still open (release never set)
        assert not release.is_set()
        request.cancel()
        await asyncio.gather(request, return_exceptions=True)


async def test_with_the_date_header_on_it_keeps_uvicorns_loop_and_still_stops(
        tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    server = _server(_app(asyncio.Event(), asyncio.Event()), date_header=True)
    task = await _serving(server, _listening(path))
    async with httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=str(path))) as client:
        reply = await client.get("http://s/fast")
    assert "date" in reply.headers  # uvicorn's loop set it
    server.request_exit()
    async with asyncio.timeout(10):
        await task


def test_the_uvicorn_internals_it_leans_on_are_there() -> None:
    serve = inspect.getsource(uvicorn.Server._serve)
    assert "await self.main_loop()" in serve and "await self.shutdown(sockets=sockets)" in serve
    assert "self.lifespan = " in serve
    assert "self.servers" in inspect.getsource(uvicorn.Server.startup)
    assert list(inspect.signature(uvicorn.Server.shutdown).parameters) == ["self", "sockets"]
    assert list(inspect.signature(uvicorn.Server.main_loop).parameters) == ["self"]
    shutdown = inspect.getsource(uvicorn.Server.shutdown)
    assert "self.server_state.connections" in shutdown and "connection.shutdown()" in shutdown
    assert "self.lifespan.shutdown()" in shutdown
    loop = inspect.getsource(uvicorn.Server.on_tick)
    assert "date_header" in loop and "limit_max_requests" in loop  # what the fallback keeps
