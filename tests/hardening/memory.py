"""The plugin's trunk without a socket: an in-memory transport and a checker for what it wrote.

`plugin_trunk()` builds the same objects a session builds (Trunk on conns 1/2,
PluginService table, from bridge.nri.stub.plugin_service) over `MemoryTransport`, so the
fuzzers can call
`data_received` directly and inspect every write.
"""

from __future__ import annotations

import asyncio
from typing import Any

from bridge.contract.catalogue import NriEvent
from bridge.nri.cache import StateCache
from bridge.nri.handler_api import Handler
from bridge.nri.runtime_setup import ServiceOptions
from bridge.nri.service import PluginService, SessionHooks
from bridge.nri.stub import plugin_service
from bridge.transport.trunk import Trunk
from bridge.wire import mux, ttrpc


class MemoryTransport(asyncio.Transport):
    """Collects writes; `close()` reports connection_lost on the next loop turn, as asyncio does."""

    def __init__(self, protocol: asyncio.Protocol) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self._protocol = protocol
        self._closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        assert not self._closing, "write after close"
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        if not self._closing:
            self._closing = True
            asyncio.get_running_loop().call_soon(self._protocol.connection_lost, None)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default


class EveryEvent(Handler):
    """Subscribes to every event and answers each with "no change"."""

    def wanted_events(self) -> frozenset[NriEvent]:
        return frozenset(NriEvent)


def plugin_trunk(max_request_bytes: int) -> tuple[Trunk, MemoryTransport, PluginService]:
    hooks = SessionHooks(defer=lambda updates: None, on_configured=lambda runtime: None,
                         on_synchronized=lambda: None)
    service = plugin_service(EveryEvent(), StateCache(), hooks, ServiceOptions())
    trunk = Trunk(server_conn=mux.PLUGIN_SERVICE_CONN, client_conn=mux.RUNTIME_SERVICE_CONN,
                  services=service.table(), max_request_bytes=max_request_bytes, name="fuzz")
    transport = MemoryTransport(trunk)
    trunk.connection_made(transport)
    return trunk, transport, service


def decode_write(data: bytes, conn_id: int) -> ttrpc.Frame:
    """One write of the plugin: exactly one ttrpc frame in the Go mux pattern
    (docs/protocol.md#the-4096-byte-rule)."""
    decoder = mux.MuxDecoder()
    pieces = decoder.feed(data)
    assert decoder.pending_bytes == 0, "a write ends inside a mux frame"
    assert pieces and all(conn == conn_id and payload for conn, payload in pieces), pieces
    assert len(pieces) <= 2, "a message went out in more than two mux frames"
    assert len(pieces[0][1]) <= mux.GO_READ_BUFFER_BYTES, "first frame exceeds 4096 bytes"
    if len(pieces) == 2:
        assert len(pieces[0][1]) == mux.GO_READ_BUFFER_BYTES
    frames = ttrpc.FrameDecoder().feed(b"".join(payload for _, payload in pieces))
    assert len(frames) == 1 and isinstance(frames[0], ttrpc.Frame), "not exactly one frame"
    return frames[0]


def other_tasks() -> set[asyncio.Task[Any]]:
    current = asyncio.current_task()
    return {t for t in asyncio.all_tasks() if t is not current and not t.done()}
