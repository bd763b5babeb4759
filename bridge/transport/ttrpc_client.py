"""ttrpc client for one logical connection: concurrent unary calls keyed by stream id."""

from __future__ import annotations

import asyncio
import logging

from bridge.errors import ProtocolError, RpcError
from bridge.transport.carrier import Carrier
from bridge.wire import envelope, ttrpc
from bridge.wire.status import Code
from bridge.wire.streams import ClientStreamIds

log = logging.getLogger(__name__)


class TtrpcClient:
    def __init__(self, trunk: Carrier) -> None:
        self._trunk = trunk
        self._ids = ClientStreamIds()
        self._pending: dict[int, asyncio.Future[envelope.Response]] = {}
        self._closed_error: Exception | None = None

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    async def call(
        self,
        service: str,
        method: str,
        payload: bytes,
        *,
        timeout_s: float,
        send_timeout: bool = True,
        metadata: tuple[tuple[str, str], ...] = (),
    ) -> bytes:
        """Make one unary call; returns the response payload or raises.

        `timeout_s` bounds the local wait. It is also sent as timeout_nano unless
        `send_timeout` is false (the Go stub sends no deadline for UpdateContainers).
        """
        if self._closed_error is not None:
            raise self._closed_error
        loop = asyncio.get_running_loop()
        future: asyncio.Future[envelope.Response] = loop.create_future()
        stream_id = self._ids.allocate()
        data = envelope.encode_request(envelope.Request(
            service=service, method=method, payload=payload,
            timeout_nano=int(timeout_s * 1e9) if send_timeout else 0, metadata=metadata,
        ))
        self._pending[stream_id] = future
        try:
            self._trunk.send_request(stream_id, data)
            async with asyncio.timeout(timeout_s):
                response = await future
        except TimeoutError:
            raise RpcError(Code.DEADLINE_EXCEEDED,
                           f"{method}: no response within {timeout_s:.3f}s") from None
        finally:
            self._pending.pop(stream_id, None)
        if not response.ok:
            raise RpcError(response.code, response.message)
        return response.payload

    def open_stream(self, stream_id: int | None = None,
                    ) -> tuple[int, asyncio.Future[envelope.Response]]:
        """Reserve a stream for a request the caller frames and writes itself.

        For what `call` refuses to produce (the simulator's oversized v0.6
        Synchronize, hostile frames). The id comes from the normal allocator
        unless given, so ids stay increasing on the wire; the Response for it
        resolves the returned future. Always pair with `close_stream`.
        """
        if self._closed_error is not None:
            raise self._closed_error
        sid = self._ids.allocate() if stream_id is None else stream_id
        future: asyncio.Future[envelope.Response] = asyncio.get_running_loop().create_future()
        self._pending[sid] = future
        return sid, future

    def close_stream(self, stream_id: int) -> None:
        self._pending.pop(stream_id, None)

    def frame_received(self, frame: ttrpc.Frame | ttrpc.OversizedFrame) -> None:
        future = self._pending.get(frame.stream_id)
        if future is None or future.done():
            log.warning("%s: dropping frame type %d for unknown stream %d",
                        self._trunk.name, frame.type, frame.stream_id)
            return
        if isinstance(frame, ttrpc.OversizedFrame):
            future.set_exception(RpcError(Code.RESOURCE_EXHAUSTED,
                                          f"response of {frame.length} bytes exceeds the limit"))
            return
        if frame.type != ttrpc.MessageType.RESPONSE:
            future.set_exception(ProtocolError(
                f"frame type {frame.type} on unary stream {frame.stream_id}"))
            return
        try:
            future.set_result(envelope.decode_response(frame.data))
        except ProtocolError as exc:
            future.set_exception(exc)

    def fail_all(self, error: Exception) -> None:
        self._closed_error = error
        for future in self._pending.values():
            if not future.done():
                future.set_exception(error)
        self._pending.clear()
