"""The plugins connected to the simulated runtime, and what became of each.

Owns: the runtime's connections in the order they came (`connections`), the active ones in
invocation order (`plugins`), the queue `wait_plugin()` reads of the plugins that reached active,
closing a plugin by the runtime's decision (kept in `closed_plugins` with why) and noticing one
that went away by itself (`lost_plugins`), and closing them all when the runtime stops or
crashes. Must not: drive a plugin's handshake (bridge.simulator.plugin_start) or deliver events to
the plugins (bridge.simulator.delivery).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from bridge.simulator.connection import PluginConnection
from bridge.transport.trunk import Trunk

log = logging.getLogger(__name__)

CLOSE_WAIT_S = 2.0


class PluginRegistry:
    """Every plugin connection of one runtime; see the module docstring."""

    def __init__(self) -> None:
        self.connections: list[PluginConnection] = []
        self.closed_plugins: list[tuple[str, str]] = []  # closed by the runtime, with why
        self.lost_plugins: list[tuple[str, str]] = []  # went away by themselves
        self._ready: asyncio.Queue[PluginConnection] = asyncio.Queue()
        self._tasks: set[asyncio.Task[None]] = set()
        self._seq = 0

    @property
    def plugins(self) -> list[PluginConnection]:
        """Active plugins in invocation order (ascending index)."""
        return sorted((c for c in self.connections if c.is_active),
                      key=lambda c: (c.index, c.seq))

    def new_connection(self) -> PluginConnection:
        self._seq += 1
        conn = PluginConnection(self._seq)
        self.connections.append(conn)
        return conn

    def keep(self, task: asyncio.Task[None]) -> None:
        """Own a task of one connection's (its watcher, a launched plugin's start): `stop()`
        cancels it."""
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def activated(self, conn: PluginConnection) -> None:
        self._ready.put_nowait(conn)

    async def wait_plugin(self, timeout_s: float) -> PluginConnection:
        """The next plugin that completed register/configure/synchronize."""
        async with asyncio.timeout(timeout_s):
            while True:
                conn = await self._ready.get()
                if conn.is_active:
                    return conn

    def close_plugin(self, conn: PluginConnection, reason: str) -> None:
        if conn.close(reason):
            log.warning("closing plugin %s: %s", conn.label, reason)
            self.closed_plugins.append((conn.label, reason))

    async def watch(self, conn: PluginConnection, trunk: Trunk) -> None:
        await trunk.wait_closed()
        if conn.close(trunk.close_reason or "connection closed", by_runtime=False):
            log.info("plugin %s disconnected: %s", conn.label, conn.close_reason)
            self.lost_plugins.append((conn.label, conn.close_reason))

    def close_all(self, reason: str) -> None:
        for conn in self.connections:
            conn.close(reason, by_runtime=False)

    async def stop(self) -> None:
        """Close every plugin, wait for their connections to close, forget the closed ones."""
        trunks = [c.trunk for c in self.connections if c.trunk is not None]
        self.close_all("runtime stopped")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(CLOSE_WAIT_S):
                await asyncio.gather(*(t.wait_closed() for t in trunks))
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.connections = [c for c in self.connections if not c.lifecycle.closed]
