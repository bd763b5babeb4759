"""The conformance matrix's small policy, served by one of the Python servers people use.

    python -m tests.servers.python_policy SERVER --fd 3 [--idle SECONDS] [--close-always]

SERVER: uvicorn-httptools, uvicorn-h11, hypercorn, gunicorn-uvicorn, gunicorn-gthread,
aiohttp. The listening socket (Unix or TCP) is inherited as a file descriptor, so the test
owns the address. The policy is the SDK example examples/label_env_policy.py, evaluated by
the SDK's PolicyRunner (the public test kit), behind three routes every server offers:

- ``/v1/policy``: the reply with a Content-Length;
- ``/chunked``: the same reply streamed in two pieces (chunked framing);
- ``/close``: the reply with ``Connection: close``.

``--idle`` is the server's keep-alive idle timeout (its own setting, its default when absent);
``--close-always`` configures the server not to keep connections alive at all.

Owns: one server process for the tests in tests/servers. Must not: know about the bridge.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from policy_server.testing import PolicyRunner

ROOT = Path(__file__).resolve().parents[2]
RUNNER = PolicyRunner.from_module(ROOT / "examples" / "label_env_policy.py")
SERVERS = ("uvicorn-httptools", "uvicorn-h11", "hypercorn", "gunicorn-uvicorn",
           "gunicorn-gthread", "aiohttp")


def evaluate(body: bytes) -> bytes:
    return json.dumps(RUNNER.send(json.loads(body)).json).encode()


# -- ASGI (uvicorn, hypercorn, gunicorn with uvicorn workers) ------------------------------

async def asgi_app(scope: dict[str, Any], receive: Callable[..., Any],
                   send: Callable[..., Any]) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    reply = evaluate(body)
    path = scope["path"]
    headers = [(b"content-type", b"application/json")]
    if path == "/chunked":
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": reply[:5], "more_body": True})
        await send({"type": "http.response.body", "body": reply[5:]})
        return
    headers.append((b"content-length", str(len(reply)).encode()))
    if path == "/close":
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": reply})


# -- WSGI (gunicorn's gthread worker) ------------------------------------------------------

def wsgi_app(environ: dict[str, Any], start: Callable[..., Any]) -> Iterable[bytes]:
    size = int(environ.get("CONTENT_LENGTH") or 0)
    reply = evaluate(environ["wsgi.input"].read(size))
    path = environ["PATH_INFO"]
    headers = [("Content-Type", "application/json")]
    if path == "/chunked":  # no length: gunicorn frames it chunked for an HTTP/1.1 client
        start("200 OK", headers)
        return [reply[:5], reply[5:]]
    headers.append(("Content-Length", str(len(reply))))
    if path == "/close":
        headers.append(("Connection", "close"))
    start("200 OK", headers)
    return [reply]


# -- the servers ---------------------------------------------------------------------------

def run_uvicorn(http: str, fd: int, idle: float | None, close_always: bool) -> None:
    import uvicorn

    keep_alive = 0 if close_always else (5 if idle is None else idle)
    config = uvicorn.Config(asgi_app, fd=fd, http=http, lifespan="on", log_level="warning",
                            timeout_keep_alive=keep_alive)  # type: ignore[arg-type]
    uvicorn.Server(config).run()


def run_hypercorn(fd: int, idle: float | None, close_always: bool) -> None:
    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    config = Config()
    config.bind = [f"fd://{fd}"]
    config.loglevel = "WARNING"
    if idle is not None:
        config.keep_alive_timeout = idle
    if close_always:
        config.keep_alive_max_requests = 1
    asyncio.run(serve(asgi_app, config))  # type: ignore[arg-type]


def run_gunicorn(worker: str, fd: int, idle: float | None, close_always: bool) -> None:
    from gunicorn.app.base import BaseApplication

    options: dict[str, Any] = {"bind": [f"fd://{fd}"], "workers": 1, "loglevel": "warning",
                               "worker_class": worker}
    if worker == "gthread":
        options["threads"] = 4
    if close_always:
        options["keepalive"] = 0
    elif idle is not None:
        options["keepalive"] = round(idle)  # gunicorn takes whole seconds

    class App(BaseApplication):
        def load_config(self) -> None:
            for key, value in options.items():
                self.cfg.set(key, value)

        def load(self) -> Any:
            return wsgi_app if worker == "gthread" else asgi_app

    App().run()


def run_aiohttp(fd: int, idle: float | None, close_always: bool) -> None:
    from aiohttp import web

    async def handle(request: web.Request) -> web.StreamResponse:
        reply = evaluate(await request.read())
        if request.path == "/chunked":
            response = web.StreamResponse(headers={"Content-Type": "application/json"})
            response.enable_chunked_encoding()
            await response.prepare(request)
            await response.write(reply[:5])
            await response.write(reply[5:])
            await response.write_eof()
            return response
        headers = {"Content-Type": "application/json"}
        if request.path == "/close":
            headers["Connection"] = "close"
        return web.Response(body=reply, headers=headers)

    app = web.Application()
    app.router.add_post("/{tail:.*}", handle)
    keep_alive = 0.0 if close_always else (75.0 if idle is None else idle)

    async def serve() -> None:
        runner = web.AppRunner(app, keepalive_timeout=keep_alive, access_log=None)
        await runner.setup()
        await web.SockSite(runner, socket.socket(fileno=fd)).start()
        await asyncio.Event().wait()

    asyncio.run(serve())


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(prog="python -m tests.servers.python_policy")
    p.add_argument("server", choices=SERVERS)
    p.add_argument("--fd", type=int, required=True)
    p.add_argument("--idle", type=float)
    p.add_argument("--close-always", action="store_true")
    a = p.parse_args(argv)
    if a.server.startswith("uvicorn-"):
        run_uvicorn(a.server.removeprefix("uvicorn-"), a.fd, a.idle, a.close_always)
    elif a.server == "hypercorn":
        run_hypercorn(a.fd, a.idle, a.close_always)
    elif a.server.startswith("gunicorn-"):
        worker = {"gunicorn-uvicorn": "uvicorn.workers.UvicornWorker",
                  "gunicorn-gthread": "gthread"}[a.server]
        run_gunicorn(worker, a.fd, a.idle, a.close_always)
    else:
        run_aiohttp(a.fd, a.idle, a.close_always)


if __name__ == "__main__":
    main(sys.argv[1:])
