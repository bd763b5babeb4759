"""ttrpc framing: [length u32 BE][stream_id u32 BE][type u8][flags u8][data].

`FrameDecoder` reassembles frames from one logical connection's byte stream
(the concatenated mux payloads of that conn). A frame whose announced length
exceeds the limit is not buffered: its bytes are consumed and discarded as they
arrive, and an `OversizedFrame` event is produced so the server can answer
ResourceExhausted on that stream id, as Go ttrpc does
(docs/protocol.md#what-a-go-ttrpc-peer-answers).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from bridge.errors import BridgeBug

HEADER = struct.Struct(">IIBB")
HEADER_BYTES = HEADER.size
MAX_MESSAGE_BYTES = 4 << 20  # ttrpc's messageLengthMax

FLAG_REMOTE_CLOSED = 0x01
FLAG_REMOTE_OPEN = 0x02
FLAG_NO_DATA = 0x04


class MessageType(IntEnum):
    REQUEST = 0x01
    RESPONSE = 0x02
    DATA = 0x03  # streaming only; NRI never uses it and we never send it


@dataclass(frozen=True, slots=True)
class Frame:
    stream_id: int
    type: int  # a MessageType value, or an unknown type the receiver must ignore
    flags: int
    data: bytes


@dataclass(frozen=True, slots=True)
class OversizedFrame:
    """A frame that was discarded because it exceeded the size limit."""

    stream_id: int
    type: int
    length: int


def encode_frame(stream_id: int, msg_type: MessageType, data: bytes, flags: int = 0) -> bytes:
    """Encode one frame; sending Data frames or oversized messages is a local bug."""
    if msg_type is MessageType.DATA:
        raise BridgeBug("ttrpc Data frames must never be sent to an NRI runtime")
    if len(data) > MAX_MESSAGE_BYTES:
        raise BridgeBug(f"ttrpc message of {len(data)} bytes exceeds {MAX_MESSAGE_BYTES}")
    return HEADER.pack(len(data), stream_id, msg_type, flags) + data


class FrameDecoder:
    """Incremental decoder for one logical ttrpc connection."""

    __slots__ = ("_buffer", "_discard", "_max_bytes")

    def __init__(self, max_bytes: int = MAX_MESSAGE_BYTES) -> None:
        self._buffer = bytearray()
        self._discard = 0  # bytes of an oversized frame still to be skipped
        self._max_bytes = max_bytes

    @property
    def pending_bytes(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes) -> list[Frame | OversizedFrame]:
        if self._discard:
            skipped = min(self._discard, len(data))
            self._discard -= skipped
            data = data[skipped:]
        buf = self._buffer
        buf += data
        out: list[Frame | OversizedFrame] = []
        offset = 0
        end = len(buf)
        while end - offset >= HEADER_BYTES:
            length, stream_id, msg_type, flags = HEADER.unpack_from(buf, offset)
            body = offset + HEADER_BYTES
            if length > self._max_bytes:
                out.append(OversizedFrame(stream_id, msg_type, length))
                available = end - body
                if available >= length:
                    offset = body + length
                    continue
                self._discard = length - available
                offset = end
                break
            if body + length > end:
                break
            out.append(Frame(stream_id, msg_type, flags, bytes(buf[body : body + length])))
            offset = body + length
        if offset:
            del buf[:offset]
        return out
