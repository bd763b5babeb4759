"""ttrpc envelopes and stream-id rules."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.errors import ProtocolError
from bridge.wire import envelope
from bridge.wire.status import Code
from bridge.wire.streams import ClientStreamIds, ServerStreamCheck


def test_request_literal_bytes() -> None:
    raw = envelope.encode_request(envelope.Request("s", "m", b"\x01", 5, (("k", "v"),)))
    # field 1 "s", field 2 "m", field 3 payload, field 4 varint 5, field 5 KeyValue{k,v}
    assert raw == bytes.fromhex("0a0173" "12016d" "1a0101" "2005" "2a060a016b120176")
    assert envelope.decode_request(raw) == envelope.Request("s", "m", b"\x01", 5, (("k", "v"),))


def test_success_response_has_no_status_and_empty_payload_is_zero_bytes() -> None:
    assert envelope.encode_ok_response(b"") == b""
    assert envelope.encode_ok_response(b"\x10\x08") == bytes.fromhex("12021008")
    resp = envelope.decode_response(b"")
    assert resp.ok and resp.payload == b""


def test_error_response_carries_status_and_no_payload() -> None:
    raw = envelope.encode_error_response(Code.UNIMPLEMENTED, "method X")
    assert raw == bytes.fromhex("0a0c" "080c" "12086d6574686f642058")
    resp = envelope.decode_response(raw)
    assert (resp.code, resp.message, resp.payload) == (12, "method X", b"")


def test_status_code_zero_counts_as_success() -> None:
    assert envelope.decode_response(bytes.fromhex("0a00" "12017a")).ok


@pytest.mark.parametrize("garbage", [b"\xff", b"\x0a\x05ab", b"\x08"])
def test_garbage_envelope_is_protocol_error(garbage: bytes) -> None:
    with pytest.raises(ProtocolError):
        envelope.decode_request(garbage)
    with pytest.raises(ProtocolError):
        envelope.decode_response(garbage)


@given(st.binary(max_size=300))
def test_random_envelopes_decode_or_protocol_error(data: bytes) -> None:
    for decode in (envelope.decode_request, envelope.decode_response):
        with contextlib.suppress(ProtocolError):
            decode(data)


def test_client_ids_are_odd_and_increasing() -> None:
    ids = ClientStreamIds()
    assert [ids.allocate() for _ in range(4)] == [1, 3, 5, 7]


def test_server_stream_rules() -> None:
    check = ServerStreamCheck()
    assert check.admit(1) is None
    assert check.admit(2) == (Code.INVALID_ARGUMENT,
                              "StreamID must be odd for client initiated streams")
    assert check.admit(1) == (Code.INVALID_ARGUMENT,
                              "StreamID cannot be re-used and must increment")
    assert check.admit(7) is None
    assert check.admit(5) is not None
