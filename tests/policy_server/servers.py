"""Real uvicorn servers on Unix sockets for integration tests (started and stopped in-process)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI, Request

from bridge.listening.prompt_server import PromptServer
from policy_server.main import bind_unix_socket
from tests.waiting import until

START_TIMEOUT_S = 5.0


@asynccontextmanager
async def serve_on_uds(app: Any, path: Path, mode: int = 0o600,
                       http: Any = "auto") -> AsyncIterator[Path]:
    sock = bind_unix_socket(path, mode)
    server = PromptServer(uvicorn.Config(app, log_level="warning", lifespan="on", http=http,
                                         date_header=False))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        await until(lambda: server.started or task.done(), what=f"uvicorn serves {path}",
                    timeout_s=START_TIMEOUT_S, interval_s=0.01)
        if task.done():
            task.result()  # it ended before it served: raise why
        yield path
    finally:
        server.request_exit()
        await asyncio.wait_for(task, START_TIMEOUT_S)
        sock.close()


class FakeBridgeControl:
    """The bridge's control API (GET /readyz, GET /v1/state, POST /v1/updates) as a real ASGI
    app; the bridge is always synchronized with its runtime."""

    def __init__(self, pods: list[dict[str, Any]], containers: list[dict[str, Any]]) -> None:
        self.pods = pods
        self.containers = containers
        self.pushed: list[dict[str, Any]] = []
        self.received = asyncio.Event()
        self.app = FastAPI()
        self.app.get("/readyz")(self.readyz)
        self.app.get("/v1/state")(self.state)
        self.app.post("/v1/updates")(self.updates)

    async def readyz(self) -> dict[str, bool]:
        return {"ready": True}

    async def state(self) -> dict[str, Any]:
        return {"pods": self.pods, "containers": self.containers}

    async def updates(self, request: Request) -> dict[str, Any]:
        body = await request.json()
        self.pushed.extend(body["update"])
        self.received.set()
        return {"failed": []}
