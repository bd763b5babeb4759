"""Stream-id rules of a ttrpc connection (docs/protocol.md#stream-ids).

Client side: ids start at 1 and grow by 2, strictly increasing in wire order.
Server side: an even id, or one not above the last id seen, is answered with
InvalidArgument on that same id; the connection survives.
"""

from __future__ import annotations

from bridge.wire.status import Code

MAX_STREAM_ID = 0xFFFFFFFF


class ClientStreamIds:
    """Allocates odd, strictly increasing stream ids for outgoing calls."""

    __slots__ = ("_next",)

    def __init__(self) -> None:
        self._next = 1

    def allocate(self) -> int:
        stream_id = self._next
        if stream_id > MAX_STREAM_ID:
            raise OverflowError("ttrpc stream ids exhausted on this connection")
        self._next += 2
        return stream_id


class ServerStreamCheck:
    """Validates the stream ids of incoming requests."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last = 0

    def admit(self, stream_id: int) -> tuple[Code, str] | None:
        """Return None if the id opens a valid new stream, else the error to answer."""
        if stream_id % 2 == 0:
            return Code.INVALID_ARGUMENT, "StreamID must be odd for client initiated streams"
        if stream_id <= self._last:
            return Code.INVALID_ARGUMENT, "StreamID cannot be re-used and must increment"
        self._last = stream_id
        return None
