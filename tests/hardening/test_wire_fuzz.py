"""Fuzzing the wire decoders and the trunk with hostile runtime input
(docs/protocol.md#what-a-go-ttrpc-peer-answers, docs/protocol.md#the-connection-multiplexer,
docs/protocol.md#hostile-input).

Properties, each checked against random input:
- the mux and ttrpc decoders give the same frames however the bytes are cut,
  buffer no more than one frame, and raise nothing but ProtocolError;
- the trunk, fed a hostile stream in random reads, answers every stream
  exactly as the reference (`wire_model.expected_answers`) says: status code
  and message per stream id, nothing for frames that must be ignored, each
  answer one ttrpc frame in the Go mux pattern; a mux length above 16 MiB + 8
  closes the connection; no exception escapes and no task outlives it;
- as a client (conn 2), a Response decides exactly one pending call, anything
  else on that stream fails the call, and stray frames are dropped.

`NWB_FUZZ_EXAMPLES` sets the number of examples (default 150, enough for the
test run); `benchmarks/fuzz_wire.py` runs the same properties for much longer.
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge.errors import ConnectionClosed, ProtocolError, RpcError
from bridge.wire import envelope, mux, ttrpc
from bridge.wire.status import Code

from .memory import decode_write, other_tasks, plugin_trunk
from .wire_model import (
    FUZZ_REQUEST_LIMIT,
    OUTPUT_TYPES,
    HostileStream,
    answer_counts,
    expected_answers,
    hostile_streams,
    split_reads,
)

EXAMPLES = int(os.environ.get("NWB_FUZZ_EXAMPLES", "150"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# -- the sans-IO decoders -------------------------------------------------------------------


def _cut(data: bytes, sizes: list[int]) -> list[bytes]:
    return split_reads(data, tuple(sizes))


@FUZZ
@given(st.lists(st.tuples(st.integers(0, 8), st.binary(max_size=300)), max_size=10),
       st.lists(st.integers(1, 700), max_size=12), st.binary(max_size=12))
def test_mux_decoding_is_independent_of_how_bytes_are_cut(
        frames: list[tuple[int, bytes]], sizes: list[int], tail: bytes) -> None:
    data = b"".join(mux.HEADER.pack(c, len(p)) + p for c, p in frames) + tail[:7]
    whole = mux.MuxDecoder()
    cut = mux.MuxDecoder()
    got = [piece for chunk in _cut(data, sizes) for piece in cut.feed(chunk)]
    assert got == whole.feed(data) == frames
    # Only a cut-off header is left over: never more than one frame's worth.
    assert cut.pending_bytes == whole.pending_bytes == len(tail[:7])


@FUZZ
@given(st.binary(max_size=4000), st.lists(st.integers(1, 600), max_size=12))
def test_mux_random_bytes_buffer_at_most_one_frame(data: bytes, sizes: list[int]) -> None:
    limit = 1 << 12
    decoder = mux.MuxDecoder(max_payload=limit)
    try:
        for chunk in _cut(data, sizes):
            for _conn, payload in decoder.feed(chunk):
                assert len(payload) <= limit
            assert decoder.pending_bytes < mux.HEADER_BYTES + limit
    except ProtocolError as exc:
        assert "announces" in str(exc)


@FUZZ
@given(st.lists(st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 255), st.integers(0, 255),
                          st.binary(max_size=200)), max_size=8),
       st.lists(st.integers(1, 300), max_size=12))
def test_ttrpc_decoding_is_independent_of_how_bytes_are_cut(
        frames: list[tuple[int, int, int, bytes]], sizes: list[int]) -> None:
    limit = 100
    data = b"".join(ttrpc.HEADER.pack(len(b), sid, t, f) + b for sid, t, f, b in frames)
    expected = [ttrpc.OversizedFrame(sid, t, len(b)) if len(b) > limit
                else ttrpc.Frame(sid, t, f, b) for sid, t, f, b in frames]
    whole = ttrpc.FrameDecoder(max_bytes=limit)
    cut = ttrpc.FrameDecoder(max_bytes=limit)
    got = [frame for chunk in _cut(data, sizes) for frame in cut.feed(chunk)]
    assert got == whole.feed(data) == expected
    assert cut.pending_bytes == 0


@FUZZ
@given(st.integers(101, 2**32 - 1), st.lists(st.integers(1, 5000), min_size=1, max_size=6))
def test_ttrpc_oversized_frame_is_never_buffered(length: int, sizes: list[int]) -> None:
    decoder = ttrpc.FrameDecoder(max_bytes=100)
    header = ttrpc.HEADER.pack(length, 9, ttrpc.MessageType.REQUEST, 0)
    assert decoder.feed(header) == [ttrpc.OversizedFrame(9, ttrpc.MessageType.REQUEST, length)]
    sent = 0
    for size in sizes:
        size = min(size, length - sent)
        assert decoder.feed(b"\xff" * size) == []
        sent += size
        assert decoder.pending_bytes == 0  # discarded as it arrives
    if sent == length:  # the frame after it decodes normally
        nxt = ttrpc.encode_frame(11, ttrpc.MessageType.REQUEST, b"ok")
        assert decoder.feed(nxt) == [ttrpc.Frame(11, ttrpc.MessageType.REQUEST, 0, b"ok")]


# -- the trunk as the Plugin-service server (conn 1) ------------------------------------------


async def _serve(stream: HostileStream) -> None:
    trunk, transport, service = plugin_trunk(FUZZ_REQUEST_LIMIT)
    for chunk in split_reads(stream.data, stream.reads):
        if not trunk.is_open:
            break
        trunk.data_received(chunk)  # nothing may escape from here
    async with asyncio.timeout(5):
        await trunk.server.idle()
    answers = [decode_write(data, mux.PLUGIN_SERVICE_CONN) for data in transport.writes]
    expected = expected_answers(stream.frames, FUZZ_REQUEST_LIMIT)
    got = Counter((a.stream_id, envelope.decode_response(a.data).code) for a in answers)
    if stream.tail == "oversized-mux":
        # The connection is closed; what was answered before must be right.
        assert trunk.close_reason == (
            f"protocol violation: mux frame for conn 1 announces {mux.MAX_MUX_PAYLOAD_BYTES + 1} "
            f"bytes (limit {mux.MAX_MUX_PAYLOAD_BYTES})")
        assert not got - answer_counts(expected)
    else:
        assert trunk.is_open
        assert got == answer_counts(expected)
        assert (trunk.pending_bytes == 0) == (stream.tail == "")
    for frame in answers:
        assert frame.type == ttrpc.MessageType.RESPONSE and frame.flags == 0
        response = envelope.decode_response(frame.data)
        wanted = [a for sid, a in expected if sid == frame.stream_id and a.code == response.code]
        assert any(a.matches(response.code, response.message) for a in wanted), (
            frame.stream_id, response)
        if response.ok:  # the payload is the method's response type
            [method] = {a.method for a in wanted}
            OUTPUT_TYPES[method]().ParseFromString(response.payload)
        else:
            # An error carries no payload (docs/protocol.md#request-and-response).
            assert response.payload == b""
    transport.close()  # EOF: partial data is dropped, every task ends
    await trunk.wait_closed()
    service.shutdown()
    for _ in range(5):
        await asyncio.sleep(0)
    assert not trunk.is_open and not other_tasks()


@FUZZ
@given(hostile_streams())
def test_trunk_answers_hostile_streams_as_the_protocol_says(stream: HostileStream) -> None:
    asyncio.run(_serve(stream))


# -- the trunk as the Runtime-service client (conn 2) -----------------------------------------

_REPLY = st.one_of(
    st.builds(lambda p: (int(ttrpc.MessageType.RESPONSE), envelope.encode_ok_response(p)),
              st.binary(max_size=20)),
    st.builds(lambda c, m: (int(ttrpc.MessageType.RESPONSE), envelope.encode_error_response(c, m)),
              st.integers(1, 16), st.text(max_size=10)),
    st.tuples(st.just(int(ttrpc.MessageType.RESPONSE)), st.binary(max_size=12)),  # garbage
    st.tuples(st.sampled_from((int(ttrpc.MessageType.DATA), int(ttrpc.MessageType.REQUEST))),
              st.binary(max_size=12)),
    st.tuples(st.just(-1), st.just(b"")),  # oversized
)


async def _call_and_answer(replies: list[tuple[int, int, bytes]], sizes: list[int]) -> None:
    trunk, transport, _ = plugin_trunk(FUZZ_REQUEST_LIMIT)
    calls = [asyncio.create_task(trunk.client.call("nri.pkg.api.v1alpha1.Runtime",
                                                   "UpdateContainers", b"", timeout_s=5))
             for _ in range(3)]
    await asyncio.sleep(0)
    assert [decode_write(w, mux.RUNTIME_SERVICE_CONN).stream_id for w in transport.writes] == \
        [1, 3, 5]
    data = b""
    first: dict[int, tuple[int, bytes]] = {}
    for sid, kind, body in replies:
        if kind == -1:
            data += mux.encode_message(mux.RUNTIME_SERVICE_CONN, ttrpc.HEADER.pack(
                ttrpc.MAX_MESSAGE_BYTES + 1, sid, ttrpc.MessageType.RESPONSE, 0))
            data += mux.HEADER.pack(mux.RUNTIME_SERVICE_CONN, ttrpc.MAX_MESSAGE_BYTES + 1) \
                + b"\0" * (ttrpc.MAX_MESSAGE_BYTES + 1)
        else:
            data += mux.encode_message(mux.RUNTIME_SERVICE_CONN,
                                       ttrpc.HEADER.pack(len(body), sid, kind, 0) + body)
        first.setdefault(sid, (kind, body))
    for chunk in split_reads(data, tuple(sizes)):
        trunk.data_received(chunk)
    for _ in range(3):
        await asyncio.sleep(0)
    transport.close()
    await trunk.wait_closed()
    for sid, task in zip((1, 3, 5), calls, strict=True):
        outcome: BaseException | bytes
        try:
            outcome = await task
        except (RpcError, ProtocolError, ConnectionClosed) as exc:
            outcome = exc
        if sid not in first:
            assert isinstance(outcome, ConnectionClosed)  # failed by the close, not before
            continue
        kind, body = first[sid]
        if kind == -1:
            assert isinstance(outcome, RpcError) and outcome.code == Code.RESOURCE_EXHAUSTED
        elif kind != ttrpc.MessageType.RESPONSE:
            # ErrProtocol on a unary stream (docs/protocol.md#what-a-go-ttrpc-peer-answers).
            assert isinstance(outcome, ProtocolError)
        else:
            try:
                response = envelope.decode_response(body)
            except ProtocolError:
                assert isinstance(outcome, ProtocolError)
                continue
            if response.ok:
                assert outcome == response.payload
            else:
                assert isinstance(outcome, RpcError)
                assert (outcome.code, outcome.message) == (response.code, response.message)
    assert transport.writes[3:] == []  # a client never answers what it receives
    assert not other_tasks()


@settings(max_examples=max(10, EXAMPLES // 5), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from((1, 3, 5, 7, 2, 0xFFFFFFFF)), _REPLY)
                .map(lambda t: (t[0], *t[1])), max_size=6),
       st.lists(st.integers(1, 4096), max_size=6))
def test_client_settles_each_call_by_the_first_frame_on_its_stream(
        replies: list[tuple[int, int, bytes]], sizes: list[int]) -> None:
    asyncio.run(_call_and_answer(replies, sizes))


@pytest.mark.parametrize("tail", ["", "partial-header", "partial-payload"])
def test_eof_mid_frame_closes_and_ends_every_task(tail: str) -> None:
    """Truncation at EOF (docs/protocol.md#hostile-input): partial data is discarded, pending calls
    fail, tasks end."""
    async def scenario() -> None:
        trunk, _, _ = plugin_trunk(FUZZ_REQUEST_LIMIT)
        call = asyncio.create_task(trunk.client.call("nri.pkg.api.v1alpha1.Runtime",
                                                     "RegisterPlugin", b"", timeout_s=5))
        await asyncio.sleep(0)
        partial = {"": b"", "partial-header": b"\x00\x00\x00\x01\x00",
                   "partial-payload": mux.HEADER.pack(1, 30) + b"\x00\x00\x00"}[tail]
        trunk.data_received(partial)
        assert trunk.pending_bytes == len(partial)
        trunk.eof_received()
        trunk.connection_lost(None)
        with pytest.raises(ConnectionClosed, match="connection closed by peer"):
            await call
        assert not trunk.is_open and not other_tasks()
    asyncio.run(scenario())
