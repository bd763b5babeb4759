"""Serve the control app with uvicorn inside the bridge's own event loop.

Owns the listening sockets: a Unix socket created with the configured mode
(never world-writable; uvicorn's own `uds=` would chmod it 0666) and an
optional loopback TCP socket. Leaves signal handling to bridge.app: uvicorn's
signal capture is switched off.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Generator

import uvicorn
from starlette.types import ASGIApp

from bridge.control.settings import ControlSettings
from bridge.errors import BridgeError
from bridge.transport import listen

log = logging.getLogger(__name__)

SHUTDOWN_GRACE_S = 1.0


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield  # bridge.app owns SIGTERM/SIGINT


def unix_listener(path: str, mode: int) -> socket.socket:
    """The control socket (see bridge.transport.listen); failures as BridgeError."""
    try:
        return listen.unix_listener(path, mode)
    except listen.ListenError as exc:
        raise BridgeError(str(exc)) from None


class ControlServer:
    def __init__(self, app: ASGIApp, settings: ControlSettings) -> None:
        self.settings = settings
        self._sockets: list[socket.socket] = []
        self._socket_path: str | None = None
        config = uvicorn.Config(app, lifespan="off", log_config=None, access_log=False,
                                timeout_graceful_shutdown=int(SHUTDOWN_GRACE_S) or 1,
                                server_header=False, date_header=False)
        self._server = _Server(config)

    def open(self) -> list[str]:
        """Bind the listeners now (so failures surface before the bridge connects).

        Returns what it listens on. An explicitly configured socket that cannot
        be bound raises; the default one only logs, so a bridge started without
        root keeps working without a control API.
        """
        s = self.settings
        where: list[str] = []
        if s.socket_path is not None:
            try:
                self._sockets.append(unix_listener(s.socket_path, s.socket_mode))
                self._socket_path = s.socket_path
                where.append(f"unix://{s.socket_path}")
            except (OSError, BridgeError) as exc:
                if s.explicit_socket:
                    raise BridgeError(f"control socket {s.socket_path}: {exc}") from None
                log.warning("control API not listening on %s: %s", s.socket_path, exc)
        if s.address is not None:
            try:
                self._sockets.append(listen.tcp_listener(*s.address))
            except listen.ListenError as exc:
                raise BridgeError(f"control address: {exc}") from None
            where.append(f"http://{s.address[0]}:{s.address[1]}")
        return where

    async def serve(self) -> None:
        """Serve until `stop()`; returns at once if nothing is listening."""
        if not self._sockets:
            return
        try:
            await self._server.serve(sockets=self._sockets)
        finally:
            self._cleanup()

    def stop(self) -> None:
        self._server.should_exit = True

    @property
    def started(self) -> bool:
        return self._server.started

    def close(self) -> None:
        """Release the listeners of a server that will never serve."""
        self._cleanup()

    def _cleanup(self) -> None:
        for sock in self._sockets:
            sock.close()
        self._sockets.clear()
        if self._socket_path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._socket_path)
            self._socket_path = None


async def wait_started(server: ControlServer, timeout_s: float = 5.0) -> None:
    """For tests and startup ordering: wait until uvicorn accepts connections."""
    async with asyncio.timeout(timeout_s):
        while not server.started:  # noqa: ASYNC110 - uvicorn exposes only a flag
            await asyncio.sleep(0.005)
