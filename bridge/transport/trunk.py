"""The trunk: one Unix stream socket carrying two logical ttrpc connections.

`Trunk` is an asyncio Protocol. It feeds received bytes through the sans-IO
mux and ttrpc decoders, hands frames to the ttrpc server (bound to one conn id)
and the ttrpc client (bound to the other), and writes outgoing messages in the
Go mux pattern. Writes happen synchronously inside the event loop, so stream-id
allocation and the write of the frame are one atomic step and ids are strictly
increasing on the wire (docs/protocol.md#stream-ids) without an explicit lock.

The same class serves the plugin (server on conn 1, client on conn 2) and the
runtime simulator (server on conn 2, client on conn 1).
"""

from __future__ import annotations

import asyncio
import logging
from typing import cast

from bridge.errors import ConnectionClosed, ProtocolError
from bridge.transport.ttrpc_client import TtrpcClient
from bridge.transport.ttrpc_server import ServiceTable, TtrpcServer
from bridge.wire import mux, ttrpc

log = logging.getLogger(__name__)


class Trunk(asyncio.Protocol):
    def __init__(
        self,
        *,
        server_conn: int,
        client_conn: int,
        services: ServiceTable,
        max_request_bytes: int = ttrpc.MAX_MESSAGE_BYTES,
        name: str = "trunk",
    ) -> None:
        self.name = name
        self._server_conn = server_conn
        self._client_conn = client_conn
        self._mux = mux.MuxDecoder()
        self._server_frames = ttrpc.FrameDecoder(max_bytes=max_request_bytes)
        self._client_frames = ttrpc.FrameDecoder()
        self._transport: asyncio.Transport | None = None
        loop = asyncio.get_running_loop()
        self._closed: asyncio.Future[None] = loop.create_future()
        self.close_reason: str = ""
        self.server = TtrpcServer(self, services, max_request_bytes)
        self.client = TtrpcClient(self)

    # -- asyncio.Protocol -------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        try:
            pieces = self._mux.feed(data)
            for conn_id, payload in pieces:
                if not payload:
                    continue  # zero-length frames are harmless; ignore them
                if conn_id == self._server_conn:
                    for frame in self._server_frames.feed(payload):
                        self.server.frame_received(frame)
                elif conn_id == self._client_conn:
                    for frame in self._client_frames.feed(payload):
                        self.client.frame_received(frame)
                else:
                    log.warning("%s: dropping %d bytes for unknown mux conn %d",
                                self.name, len(payload), conn_id)
        except ProtocolError as exc:
            log.error("%s: protocol violation, closing: %s", self.name, exc)
            self.close(f"protocol violation: {exc}")

    def eof_received(self) -> bool:
        return False  # close the transport; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.close_reason:
            self.close_reason = f"connection lost: {exc}" if exc else "connection closed by peer"
        self._transport = None
        self.server.shutdown()
        self.client.fail_all(ConnectionClosed(self.close_reason))
        if not self._closed.done():
            self._closed.set_result(None)

    # -- used by server and client ------------------------------------------

    def send(self, conn_id: int, stream_id: int, msg_type: ttrpc.MessageType, data: bytes) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            raise ConnectionClosed(self.close_reason or "trunk is closed")
        transport.write(mux.encode_message(conn_id, ttrpc.encode_frame(stream_id, msg_type, data)))

    def send_response(self, stream_id: int, data: bytes) -> None:
        self.send(self._server_conn, stream_id, ttrpc.MessageType.RESPONSE, data)

    def send_request(self, stream_id: int, data: bytes) -> None:
        self.send(self._client_conn, stream_id, ttrpc.MessageType.REQUEST, data)

    def send_raw(self, data: bytes) -> None:
        """Write bytes as they are (tests and the simulator's hostile mode only)."""
        if self._transport is None:
            raise ConnectionClosed(self.close_reason or "trunk is closed")
        self._transport.write(data)

    # -- lifecycle ------------------------------------------------------------

    @property
    def pending_bytes(self) -> int:
        """Received bytes not yet part of a complete frame (0 between whole messages)."""
        return (self._mux.pending_bytes + self._server_frames.pending_bytes
                + self._client_frames.pending_bytes)

    @property
    def is_open(self) -> bool:
        return self._transport is not None and not self._transport.is_closing()

    def close(self, reason: str = "closed locally") -> None:
        if not self.close_reason:
            self.close_reason = reason
        if self._transport is not None:
            self._transport.close()

    async def wait_closed(self) -> None:
        await asyncio.shield(self._closed)
