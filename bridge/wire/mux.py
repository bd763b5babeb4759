"""NRI connection multiplexer framing (pkg/net/multiplex): [conn u32 BE][len u32 BE][payload].

Two logical ttrpc connections share one stream socket:
conn 1 carries the Plugin service (runtime = client), conn 2 the Runtime
service (plugin = client). Payloads of successive frames of one conn
concatenate into that conn's byte stream.

Writing follows the Go writer's pattern exactly, because the runtime reads each
conn through a 4096-byte buffered reader and a frame that *starts* a ttrpc
message must fit in it (docs/protocol.md#the-4096-byte-rule): a message of ≤ 4096 bytes goes out as
one frame, a larger one as two frames (the first 4096 bytes, then the rest).
Two messages never share a frame and zero-length frames are never sent.
"""

from __future__ import annotations

import struct

from bridge.errors import BridgeBug, ProtocolError

HEADER = struct.Struct(">II")
HEADER_BYTES = HEADER.size

PLUGIN_SERVICE_CONN = 1
RUNTIME_SERVICE_CONN = 2
KNOWN_CONNS = frozenset((PLUGIN_SERVICE_CONN, RUNTIME_SERVICE_CONN))

# The runtime's per-conn read buffer (Go bufio default); see module docstring.
GO_READ_BUFFER_BYTES = 4096
# Old (v0.6.x) runtimes do not split writes and can emit a continuation frame of
# up to 16 MiB; anything above 16 MiB + 8 is treated as hostile (docs/protocol.md#size-limits).
MAX_MUX_PAYLOAD_BYTES = (16 << 20) + 8


def encode_message(conn_id: int, message: bytes) -> bytes:
    """Frame one complete ttrpc message for `conn_id` in the Go writer's pattern."""
    if conn_id not in KNOWN_CONNS:
        raise BridgeBug(f"refusing to send on mux conn {conn_id}")
    size = len(message)
    if size == 0:
        raise BridgeBug("refusing to send an empty mux frame")
    if size <= GO_READ_BUFFER_BYTES:
        return HEADER.pack(conn_id, size) + message
    head = message[:GO_READ_BUFFER_BYTES]
    rest = message[GO_READ_BUFFER_BYTES:]
    return b"".join(
        (HEADER.pack(conn_id, GO_READ_BUFFER_BYTES), head, HEADER.pack(conn_id, len(rest)), rest)
    )


class MuxDecoder:
    """Splits the socket byte stream into (conn_id, payload) pieces.

    Frames for unknown conns and zero-length frames are reported to the caller
    as-is (it decides to drop and log). A length above MAX_MUX_PAYLOAD_BYTES
    raises ProtocolError before anything is allocated for it.
    """

    __slots__ = ("_buffer", "_max_payload")

    def __init__(self, max_payload: int = MAX_MUX_PAYLOAD_BYTES) -> None:
        self._buffer = bytearray()
        self._max_payload = max_payload

    @property
    def pending_bytes(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        buf = self._buffer
        buf += data
        out: list[tuple[int, bytes]] = []
        offset = 0
        end = len(buf)
        while end - offset >= HEADER_BYTES:
            conn_id, length = HEADER.unpack_from(buf, offset)
            if length > self._max_payload:
                raise ProtocolError(
                    f"mux frame for conn {conn_id} announces {length} bytes "
                    f"(limit {self._max_payload})"
                )
            frame_end = offset + HEADER_BYTES + length
            if frame_end > end:
                break
            out.append((conn_id, bytes(buf[offset + HEADER_BYTES : frame_end])))
            offset = frame_end
        if offset:
            del buf[:offset]
        return out
