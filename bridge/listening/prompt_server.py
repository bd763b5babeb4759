"""A uvicorn server, served inside the caller's event loop, that stops as soon as it is asked.

Owns `PromptServer`: `uvicorn.Server` without its signal capture (the process's entry point
owns SIGTERM/SIGINT), whose main loop waits for `request_exit()` instead of waking every
0.1 s to look at `should_exit`, and whose shutdown skips uvicorn's fixed 0.1 s pause when no
connection is open or the exit is forced (otherwise uvicorn's own shutdown runs: each open
connection is asked to finish and given its grace time). A listener with the date header
switched on (or a request limit) keeps uvicorn's main loop: that loop refreshes the header once
a second and counts requests.

Leans on uvicorn's Server.main_loop, Server.shutdown, Server.servers,
Server.server_state.connections (and their shutdown()) and Server.lifespan (checked by
tests/bridge/listening/test_prompt_server.py against the range pyproject.toml pins).

Must not: own a socket (the caller binds it and hands it to `serve(sockets=...)`).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Generator

import uvicorn


class PromptServer(uvicorn.Server):
    """uvicorn's server that returns from `serve()` as soon as `request_exit()` is called."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._exit_requested = asyncio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield  # the entry point owns SIGTERM/SIGINT

    def request_exit(self, *, force: bool = False) -> None:
        """Stop serving (`force`: without waiting for open connections and tasks)."""
        self.should_exit = True
        if force:
            self.force_exit = True
        self._exit_requested.set()

    async def main_loop(self) -> None:
        if self.config.date_header or self.config.limit_max_requests is not None:
            await super().main_loop()  # it refreshes the date header and counts requests
            return
        await self._exit_requested.wait()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self.server_state.connections and not self.force_exit:
            await super().shutdown(sockets)
            return
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()  # forced: no grace, the connection closes now
        for server in self.servers:
            await server.wait_closed()
        if not self.force_exit:
            await self.lifespan.shutdown()
