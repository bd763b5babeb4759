"""Opening the runtime connection: external socket path, or an inherited fd.

External mode dials the runtime's NRI socket (default /var/run/nri/nri.sock).
Pre-registered mode (launched by the runtime) wraps the fd named by
NRI_PLUGIN_SOCKET, normally 3 (docs/protocol.md#launched-plugins).
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable, Mapping

from bridge.errors import ConfigError
from bridge.transport.trunk import Trunk

DEFAULT_SOCKET_PATH = "/var/run/nri/nri.sock"
ENV_SOCKET = "NRI_PLUGIN_SOCKET"
ENV_NAME = "NRI_PLUGIN_NAME"
ENV_INDEX = "NRI_PLUGIN_IDX"


def inherited_fd(environ: Mapping[str, str] = os.environ) -> int | None:
    """The fd a launching runtime handed us, or None in external mode."""
    raw = environ.get(ENV_SOCKET)
    if raw is None or raw == "":
        return None
    try:
        fd = int(raw)
    except ValueError:
        raise ConfigError(ENV_SOCKET, f"not a file descriptor number: {raw!r}") from None
    if fd < 0:
        raise ConfigError(ENV_SOCKET, f"negative file descriptor {fd}")
    return fd


async def open_path(path: str, factory: Callable[[], Trunk], timeout_s: float) -> Trunk:
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(timeout_s):
        _, trunk = await loop.create_unix_connection(factory, path)
    return trunk


async def open_fd(fd: int, factory: Callable[[], Trunk]) -> Trunk:
    loop = asyncio.get_running_loop()
    sock = socket.socket(fileno=fd)
    if sock.family != socket.AF_UNIX:
        sock.detach()
        raise ConfigError(ENV_SOCKET, f"fd {fd} is not a Unix socket")
    sock.setblocking(False)
    _, trunk = await loop.create_unix_connection(factory, sock=sock)
    return trunk
