"""The simulated runtime's listening socket (docs/protocol.md#external-plugins).

Owns: binding the socket (`RuntimeSocket.open()` deletes a stale socket, creates the parent
directory with mode 0700 and listens), the accept loop that hands each connection to the
runtime one at a time, and closing it again, with or without removing the socket file (a crashed
runtime leaves it, as a dead process does). Must not: speak NRI to a connection (the accepted
socket goes to the callback, bridge.simulator.plugin_start) or know the plugins.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path

LISTEN_BACKLOG = 16


class RuntimeSocket:
    """The listener at `path`; `on_accept` runs for each connection before the next is taken."""

    def __init__(self, path: Path, on_accept: Callable[[socket.socket], Awaitable[None]]) -> None:
        self.path = path
        self._on_accept = on_accept
        self._listener: socket.socket | None = None
        self._accept_task: asyncio.Task[None] | None = None

    @property
    def listening(self) -> bool:
        return self._listener is not None

    def open(self) -> None:
        path = self.path
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            if stat.S_ISSOCK(path.lstat().st_mode):
                path.unlink()  # a stale socket from an earlier run
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(str(path))
            listener.listen(LISTEN_BACKLOG)
            listener.setblocking(False)
        except OSError:
            listener.close()
            raise
        self._listener = listener
        self._accept_task = asyncio.get_running_loop().create_task(
            self._accept_loop(listener), name="sim:accept")

    async def close(self, unlink: bool) -> None:
        """Stop accepting and close the listener; `unlink` also removes the socket file."""
        task, self._accept_task = self._accept_task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
            if unlink:
                with contextlib.suppress(FileNotFoundError):
                    self.path.unlink()

    async def _accept_loop(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            sock, _ = await loop.sock_accept(listener)
            await self._on_accept(sock)
