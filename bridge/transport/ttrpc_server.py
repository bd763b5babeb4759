"""ttrpc server for one logical connection: dispatch table service/method -> handler.

Each request runs in its own task (the reader is never blocked by a handler,
and calls are served concurrently). Outcomes follow Go ttrpc
(docs/protocol.md#what-a-go-ttrpc-peer-answers): unknown service or method -> Unimplemented;
undecodable envelope -> InvalidArgument; stream-id violations -> InvalidArgument on that id;
oversized request -> ResourceExhausted; Data frames and unknown types are ignored.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping

from bridge.errors import BridgeBug, ConnectionClosed, ProtocolError, RpcError
from bridge.transport.carrier import Carrier
from bridge.wire import envelope, ttrpc
from bridge.wire.status import Code
from bridge.wire.streams import ServerStreamCheck

log = logging.getLogger(__name__)

MethodHandler = Callable[[envelope.Request], Awaitable[bytes]]
ServiceTable = Mapping[str, Mapping[str, MethodHandler]]


class TtrpcServer:
    def __init__(self, trunk: Carrier, services: ServiceTable,
                 max_request_bytes: int = ttrpc.MAX_MESSAGE_BYTES) -> None:
        self._trunk = trunk
        self._services = services
        self._max_request_bytes = max_request_bytes  # for the ResourceExhausted message
        self._streams = ServerStreamCheck()
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    async def idle(self) -> None:
        """Wait until no handler is running (callers bound the wait)."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    def frame_received(self, frame: ttrpc.Frame | ttrpc.OversizedFrame) -> None:
        if isinstance(frame, ttrpc.OversizedFrame):
            log.warning("%s: discarded oversized frame (%d bytes) on stream %d",
                        self._trunk.name, frame.length, frame.stream_id)
            if frame.type == ttrpc.MessageType.REQUEST:
                self._reply_error(frame.stream_id, Code.RESOURCE_EXHAUSTED,
                                  f"message length {frame.length} exceed maximum message size "
                                  f"of {self._max_request_bytes}")
            return
        if frame.type != ttrpc.MessageType.REQUEST:
            # Data frames (streaming) and unknown types have no meaning for NRI.
            log.debug("%s: ignoring frame type %d on stream %d",
                      self._trunk.name, frame.type, frame.stream_id)
            return
        refusal = self._streams.admit(frame.stream_id)
        if refusal is not None:
            self._reply_error(frame.stream_id, *refusal)
            return
        try:
            request = envelope.decode_request(frame.data)
        except ProtocolError as exc:
            self._reply_error(frame.stream_id, Code.INVALID_ARGUMENT, str(exc))
            return
        methods = self._services.get(request.service)
        if methods is None:
            self._reply_error(frame.stream_id, Code.UNIMPLEMENTED, f"service {request.service}")
            return
        handler = methods.get(request.method)
        if handler is None:
            self._reply_error(frame.stream_id, Code.UNIMPLEMENTED, f"method {request.method}")
            return
        task = asyncio.get_running_loop().create_task(
            self._serve(frame.stream_id, request, handler),
            name=f"ttrpc:{request.method}:{frame.stream_id}",
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, stream_id: int, request: envelope.Request,
                     handler: MethodHandler) -> None:
        try:
            payload = await handler(request)
        except RpcError as exc:
            self._reply_error(stream_id, exc.code, exc.message)
            return
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # task boundary: log, answer Unknown as Go would
            log.exception("%s: handler for %s.%s failed", self._trunk.name,
                          request.service, request.method)
            self._reply_error(stream_id, Code.UNKNOWN, str(exc) or type(exc).__name__)
            return
        self._reply(stream_id, envelope.encode_ok_response(payload))

    def _reply_error(self, stream_id: int, code: int, message: str) -> None:
        self._reply(stream_id, envelope.encode_error_response(code, message))

    def _reply(self, stream_id: int, data: bytes) -> None:
        try:
            self._trunk.send_response(stream_id, data)
        except BridgeBug as exc:  # response larger than ttrpc allows
            log.error("%s: cannot send response on stream %d: %s", self._trunk.name, stream_id, exc)
            self._reply_error(stream_id, Code.RESOURCE_EXHAUSTED, str(exc))
        except ConnectionClosed:
            log.debug("%s: connection closed before response on stream %d",
                      self._trunk.name, stream_id)

    def shutdown(self) -> None:
        """Cancel every in-flight handler (the connection is gone)."""
        for task in list(self._tasks):
            task.cancel()
