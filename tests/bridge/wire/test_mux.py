"""Mux framing: literal byte vectors, the Go 4096-byte write pattern, hostile lengths."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.errors import BridgeBug, ProtocolError
from bridge.wire import mux

# conn 1, 3-byte payload "abc"
FRAME_CONN1 = bytes.fromhex("00000001" "00000003") + b"abc"
# conn 2, 1-byte payload "z"
FRAME_CONN2 = bytes.fromhex("00000002" "00000001") + b"z"


def feed_bytewise(decoder: mux.MuxDecoder, data: bytes) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    for i in range(len(data)):
        out.extend(decoder.feed(data[i : i + 1]))
    return out


def test_small_message_is_one_frame() -> None:
    assert mux.encode_message(1, b"abc") == FRAME_CONN1


def test_message_of_exactly_4096_bytes_is_one_frame() -> None:
    data = mux.encode_message(2, b"x" * 4096)
    assert data[:8] == bytes.fromhex("00000002" "00001000")
    assert len(data) == 8 + 4096


def test_larger_message_follows_go_pattern_4096_then_rest() -> None:
    msg = bytes(range(256)) * 20  # 5120 bytes
    data = mux.encode_message(1, msg)
    assert data[:8] == bytes.fromhex("00000001" "00001000")
    assert data[8 : 8 + 4096] == msg[:4096]
    second = data[8 + 4096 :]
    assert second[:8] == bytes.fromhex("00000001" "00000400")
    assert second[8:] == msg[4096:]


def test_never_sends_on_conn_0_or_empty() -> None:
    with pytest.raises(BridgeBug):
        mux.encode_message(0, b"a")
    with pytest.raises(BridgeBug):
        mux.encode_message(1, b"")


@pytest.mark.parametrize("feed", ["whole", "bytewise"])
def test_decode_two_frames(feed: str) -> None:
    data = FRAME_CONN1 + FRAME_CONN2
    decoder = mux.MuxDecoder()
    frames = decoder.feed(data) if feed == "whole" else feed_bytewise(decoder, data)
    assert frames == [(1, b"abc"), (2, b"z")]
    assert decoder.pending_bytes == 0


def test_trailing_partial_frame_is_kept() -> None:
    decoder = mux.MuxDecoder()
    frames = decoder.feed(FRAME_CONN1 + FRAME_CONN2[:5])
    assert frames == [(1, b"abc")]
    assert decoder.pending_bytes == 5
    assert decoder.feed(FRAME_CONN2[5:]) == [(2, b"z")]


def test_zero_length_and_unknown_conn_frames_are_reported_not_fatal() -> None:
    decoder = mux.MuxDecoder()
    data = bytes.fromhex("00000001" "00000000") + bytes.fromhex("00000007" "00000001") + b"q"
    assert decoder.feed(data) == [(1, b""), (7, b"q")]


def test_oversized_length_raises_before_allocating() -> None:
    decoder = mux.MuxDecoder()
    with pytest.raises(ProtocolError, match="announces 4294967295 bytes"):
        decoder.feed(bytes.fromhex("00000001" "ffffffff"))


def test_16_mib_continuation_frame_is_accepted() -> None:
    decoder = mux.MuxDecoder()
    payload = b"\0" * (16 << 20)
    frames = decoder.feed(mux.HEADER.pack(1, len(payload)) + payload)
    assert frames == [(1, payload)]


@given(st.binary(min_size=1, max_size=20000), st.sampled_from([1, 2]))
def test_roundtrip_reassembles_message(message: bytes, conn: int) -> None:
    decoder = mux.MuxDecoder()
    frames = decoder.feed(mux.encode_message(conn, message))
    assert all(c == conn for c, _ in frames)
    assert b"".join(p for _, p in frames) == message
    # the frame that starts the message fits the runtime's 4096-byte reader
    assert len(frames[0][1]) <= mux.GO_READ_BUFFER_BYTES
    assert len(frames) == (1 if len(message) <= 4096 else 2)


@given(st.binary(max_size=2000), st.lists(st.integers(1, 50), max_size=20))
def test_random_bytes_give_frames_or_protocol_error(data: bytes, cuts: list[int]) -> None:
    decoder = mux.MuxDecoder(max_payload=1 << 16)
    try:
        pos = 0
        for cut in cuts:
            decoder.feed(data[pos : pos + cut])
            pos += cut
        decoder.feed(data[pos:])
    except ProtocolError:
        pass
