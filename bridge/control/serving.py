"""Serve the control app with uvicorn inside the bridge's own event loop.

Owns the listening sockets: a Unix socket created with the configured mode
(never world-writable; uvicorn's own `uds=` would chmod it 0666) and an
optional loopback TCP socket, each served by its own uvicorn server so that
each has its own connection cap and its own guard (bridge.listening): the Unix
socket checks its peers' credentials, the TCP address a bearer token or a client
certificate (or nothing with `insecure`, loudly). Leaves signal handling to
bridge.app (bridge.listening.prompt_server: no signal capture, stops when asked).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import socket
from typing import Any

import uvicorn
from starlette.types import ASGIApp

from bridge.control.settings import ControlSettings
from bridge.errors import BridgeError
from bridge.listening.auth_files import load_token, uvicorn_tls
from bridge.listening.bounded_protocol import protocol_class
from bridge.listening.http_guard import GuardSettings, ListenerGuard, allowed_names
from bridge.listening.listener_config import (
    DEFAULT_BODY_BYTES,
    METRICS_BODY_BYTES,
    METRICS_MAX_CONNECTIONS,
    Bounds,
    ListenerConfigError,
    check_tcp_access,
)
from bridge.listening.peer_creds import default_rule
from bridge.listening.prompt_server import PromptServer
from bridge.transport import listen

log = logging.getLogger(__name__)

SHUTDOWN_GRACE_S = 1.0


def control_listener(path: str, mode: int) -> socket.socket:
    """The control socket (see bridge.transport.listen); failures as BridgeError."""
    try:
        return listen.unix_listener(path, mode)
    except listen.ListenError as exc:
        raise BridgeError(str(exc)) from None


class ControlServer:
    """The control listeners (`metrics_only`: the `GET /metrics` listener, unauthenticated
    and read-only, with a smaller connection cap)."""

    def __init__(self, app: ASGIApp, settings: ControlSettings, *,
                 metrics_only: bool = False) -> None:
        self.settings = settings
        self._app = app
        self._metrics_only = metrics_only
        self._listeners: list[tuple[socket.socket, PromptServer]] = []
        self._socket_path: str | None = None

    def _bounds(self) -> Bounds:
        s = self.settings
        if self._metrics_only:
            return Bounds(max_body_bytes=METRICS_BODY_BYTES, header_timeout_s=s.header_timeout_s,
                          idle_timeout_s=s.idle_timeout_s,
                          max_connections=min(s.max_connections, METRICS_MAX_CONNECTIONS))
        return Bounds(max_body_bytes=DEFAULT_BODY_BYTES, header_timeout_s=s.header_timeout_s,
                      idle_timeout_s=s.idle_timeout_s, max_connections=s.max_connections)

    def _server(self, guard: GuardSettings, tls: dict[str, Any]) -> PromptServer:
        config = uvicorn.Config(ListenerGuard(self._app, guard), lifespan="off",
                                log_config=None, access_log=False,
                                timeout_graceful_shutdown=int(SHUTDOWN_GRACE_S) or 1,
                                timeout_keep_alive=max(1, math.ceil(guard.bounds.idle_timeout_s)),
                                http=protocol_class(guard.bounds),
                                server_header=False, date_header=False, **tls)
        return PromptServer(config)

    def open(self) -> list[str]:
        """Bind the listeners now (so failures surface before the bridge connects).

        Returns what it listens on. An explicitly configured socket that cannot
        be bound raises; the default one only logs, so a bridge started without
        root keeps working without a control API.
        """
        s = self.settings
        access = s.access
        bounds = self._bounds()
        where: list[str] = []
        if s.socket_path is not None:
            try:
                sock = control_listener(s.socket_path, s.socket_mode)
            except (OSError, BridgeError) as exc:
                if s.explicit_socket:
                    raise BridgeError(f"control socket {s.socket_path}: {exc}") from None
                log.warning("control API not listening on %s: %s", s.socket_path, exc)
            else:
                self._socket_path = s.socket_path
                names = allowed_names(None, (*access.allowed_hosts,
                                             os.path.basename(s.socket_path)))
                guard = GuardSettings(
                    bounds=bounds, allowed_hosts=names,
                    peer_rule=default_rule(s.socket_path, access.allowed_uids,
                                           access.allowed_gids),
                    env_reader_uids=frozenset(access.env_reader_uids))
                self._listeners.append((sock, self._server(guard, {})))
                where.append(f"unix://{s.socket_path}")
        if s.address is not None:
            host, port = s.address
            try:
                guard, tls = self._tcp_guard(bounds, host)
                sock = listen.tcp_listener(host, port)
            except (listen.ListenError, ListenerConfigError) as exc:
                self._cleanup()
                raise BridgeError(f"control address: {exc}") from None
            self._listeners.append((sock, self._server(guard, tls)))
            where.append(f"{'https' if tls else 'http'}://{host}:{port}")
        return where

    def _tcp_guard(self, bounds: Bounds, host: str) -> tuple[GuardSettings, dict[str, Any]]:
        access = self.settings.access
        if self._metrics_only:
            return GuardSettings(bounds=bounds, check_origin=False, json_only=False), {}
        check_tcp_access(access, f"control address {host}",
                         "--insecure (control.insecure)")
        token = (load_token(access.bearer_token_file)
                 if access.bearer_token_file is not None else None)
        guard = GuardSettings(bounds=bounds, token=token, check_host=True,
                              allowed_hosts=allowed_names(host, access.allowed_hosts),
                              env_over_tcp=access.env_over_tcp and access.authenticates)
        return guard, uvicorn_tls(access.tls)

    async def serve(self) -> None:
        """Serve until `stop()`; returns at once if nothing is listening."""
        if not self._listeners:
            return
        try:
            async with asyncio.TaskGroup() as tasks:
                for sock, server in self._listeners:
                    tasks.create_task(server.serve(sockets=[sock]))
        finally:
            self._cleanup()

    def stop(self) -> None:
        for _, server in self._listeners:
            server.request_exit()

    @property
    def started(self) -> bool:
        return bool(self._listeners) and all(server.started for _, server in self._listeners)

    def close(self) -> None:
        """Release the listeners of a server that will never serve."""
        self._cleanup()

    def _cleanup(self) -> None:
        for sock, _ in self._listeners:
            sock.close()
        self._listeners.clear()
        if self._socket_path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._socket_path)
            self._socket_path = None


async def wait_started(server: ControlServer, timeout_s: float = 5.0) -> None:
    """For tests and startup ordering: wait until uvicorn accepts connections."""
    async with asyncio.timeout(timeout_s):
        while not server.started:  # noqa: ASYNC110 - uvicorn exposes only a flag
            await asyncio.sleep(0.005)
