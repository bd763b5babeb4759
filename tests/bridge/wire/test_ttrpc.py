"""ttrpc framing: literal vectors per message type, oversized discard, properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.errors import BridgeBug
from bridge.wire import ttrpc
from bridge.wire.ttrpc import Frame, FrameDecoder, MessageType, OversizedFrame

# length=2, stream=1, type=request, flags=0, data "hi"
REQUEST = bytes.fromhex("00000002" "00000001" "01" "00") + b"hi"
# length=0, stream=1, type=response, flags=0 (an empty success payload)
RESPONSE = bytes.fromhex("00000000" "00000001" "02" "00")
# length=1, stream=3, type=data, flags=remote-closed|no-data
DATA = bytes.fromhex("00000001" "00000003" "03" "05") + b"d"
# unknown type 9
UNKNOWN = bytes.fromhex("00000000" "00000005" "09" "00")

VECTORS = [
    (REQUEST, Frame(1, MessageType.REQUEST, 0, b"hi")),
    (RESPONSE, Frame(1, MessageType.RESPONSE, 0, b"")),
    (DATA, Frame(3, MessageType.DATA, 5, b"d")),
    (UNKNOWN, Frame(5, 9, 0, b"")),
]


@pytest.mark.parametrize(("raw", "frame"), VECTORS)
def test_vector_whole(raw: bytes, frame: Frame) -> None:
    assert FrameDecoder().feed(raw) == [frame]


@pytest.mark.parametrize(("raw", "frame"), VECTORS)
def test_vector_bytewise(raw: bytes, frame: Frame) -> None:
    decoder = FrameDecoder()
    out = []
    for i in range(len(raw)):
        out.extend(decoder.feed(raw[i : i + 1]))
    assert out == [frame]


@pytest.mark.parametrize(("raw", "frame"), VECTORS)
def test_vector_with_trailing_data(raw: bytes, frame: Frame) -> None:
    decoder = FrameDecoder()
    assert decoder.feed(raw + REQUEST[:4]) == [frame]
    assert decoder.pending_bytes == 4


def test_encode_matches_vectors() -> None:
    assert ttrpc.encode_frame(1, MessageType.REQUEST, b"hi") == REQUEST
    assert ttrpc.encode_frame(1, MessageType.RESPONSE, b"") == RESPONSE


def test_never_encodes_data_frames_or_oversized() -> None:
    with pytest.raises(BridgeBug):
        ttrpc.encode_frame(1, MessageType.DATA, b"")
    with pytest.raises(BridgeBug):
        ttrpc.encode_frame(1, MessageType.RESPONSE, b"\0" * (ttrpc.MAX_MESSAGE_BYTES + 1))


def test_oversized_frame_is_discarded_across_feeds_and_next_frame_survives() -> None:
    decoder = FrameDecoder(max_bytes=8)
    header = ttrpc.HEADER.pack(20, 7, MessageType.REQUEST, 0)
    out = decoder.feed(header + b"x" * 5)
    assert out == [OversizedFrame(7, MessageType.REQUEST, 20)]
    assert decoder.feed(b"x" * 10) == []
    assert decoder.feed(b"x" * 5 + REQUEST) == [Frame(1, MessageType.REQUEST, 0, b"hi")]
    assert decoder.pending_bytes == 0


def test_maximum_size_frame_is_accepted() -> None:
    body = b"\1" * ttrpc.MAX_MESSAGE_BYTES
    raw = ttrpc.encode_frame(9, MessageType.REQUEST, body)
    assert FrameDecoder().feed(raw) == [Frame(9, MessageType.REQUEST, 0, body)]


@given(st.integers(0, 2**32 - 1), st.sampled_from([MessageType.REQUEST, MessageType.RESPONSE]),
       st.integers(0, 255), st.binary(max_size=5000))
def test_roundtrip(stream_id: int, msg_type: MessageType, flags: int, data: bytes) -> None:
    raw = ttrpc.encode_frame(stream_id, msg_type, data, flags)
    assert FrameDecoder().feed(raw) == [Frame(stream_id, msg_type, flags, data)]


@given(st.binary(max_size=3000), st.integers(1, 64))
def test_random_bytes_never_raise(data: bytes, chunk: int) -> None:
    decoder = FrameDecoder(max_bytes=1024)
    for i in range(0, len(data), chunk):
        for frame in decoder.feed(data[i : i + chunk]):
            assert isinstance(frame, Frame | OversizedFrame)
