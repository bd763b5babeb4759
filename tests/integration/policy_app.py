"""A tiny policy service for integration tests: FastAPI on a Unix socket, with knobs.

`Knobs` decide per event what the policy answers, how slowly, and with which
HTTP status; every request body it receives is kept in `seen`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse

from bridge.listening.prompt_server import PromptServer
from tests.waiting import until


@dataclass
class Knobs:
    replies: dict[str, dict[str, Any]] = field(default_factory=dict)  # event -> reply JSON
    delay_s: dict[str, float] = field(default_factory=dict)  # event -> delay before answering
    status: int = 200
    seen: list[dict[str, Any]] = field(default_factory=list)

    def events(self) -> list[str]:
        return [body["event"] for body in self.seen]


def make_app(knobs: Knobs) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/policy")
    async def policy(request: Request) -> Response:
        body = await request.json()
        knobs.seen.append(body)
        delay = knobs.delay_s.get(body["event"], 0.0)
        if delay:
            await asyncio.sleep(delay)
        if knobs.status != 200:
            return Response("policy broke", status_code=knobs.status)
        return JSONResponse(knobs.replies.get(body["event"], {}))

    return app


@contextlib.asynccontextmanager
async def serve_policy(path: str, knobs: Knobs) -> AsyncIterator[None]:
    """Serve the policy app on Unix socket `path` for the duration of the block."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    sock.listen(64)
    sock.setblocking(False)
    config = uvicorn.Config(make_app(knobs), lifespan="off", log_config=None, access_log=False,
                            date_header=False)
    server = PromptServer(config)
    task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]))
    try:
        # uvicorn exposes only a flag to poll.
        await until(lambda: server.started, what="the policy app serves", timeout_s=30,
                    interval_s=0.005)
        yield
    finally:
        server.request_exit(force=True)
        async with asyncio.timeout(5):
            await task
        sock.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
