"""Hostile runtime input for the plugin's trunk, and what the protocol says must come back.

`hostile_streams()` is a hypothesis strategy for a byte stream as a runtime
(or anything else on the NRI socket) could write it: ttrpc frames on conn 1
with good, even, reused and huge stream ids; Request, Response, Data and
unknown frame types; envelopes that are valid, truncated or random; unknown
services and methods; payloads that are or are not the method's protobuf;
frames larger than the plugin accepts. Every frame may be cut over several
mux frames, with frames for conn 2, unknown conns and zero-length frames in
between (docs/protocol.md#the-connection-multiplexer), and the whole stream is cut into random
reads.

`expected_answers()` is the reference: docs/protocol.md#stream-ids,
docs/protocol.md#what-a-go-ttrpc-peer-answers applied to the frames in order, written independently
of the bridge's server (the oracle for "is this the method's input type" is the Plugin service
descriptor of api.proto). It says which Response each stream id must get and with which
status; frames that must be ignored get none.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from google.protobuf.message import DecodeError
from google.protobuf.message_factory import GetMessageClass
from hypothesis import strategies as st

from bridge.proto.nri import api_pb2 as api
from bridge.proto.nri import ttrpc_pb2
from bridge.simulator.synthetic import template
from bridge.wire import mux, ttrpc
from bridge.wire.status import Code

PLUGIN_SERVICE = "nri.pkg.api.v1alpha1.Plugin"
OTHER_SERVICES = ("nri.pkg.api.v1alpha1.Runtime", "nri.pkg.api.v1alpha1.HostFunctions",
                  "nri.pkg.api.v1alpha1.Bogus", "", "Plugin")
_PLUGIN = api.DESCRIPTOR.services_by_name["Plugin"]
INPUT_TYPES = {m.name: GetMessageClass(m.input_type) for m in _PLUGIN.methods}
OUTPUT_TYPES = {m.name: GetMessageClass(m.output_type) for m in _PLUGIN.methods}
METHODS = tuple(sorted(INPUT_TYPES))
# Names a careless runtime could send instead of the bare method name
# (docs/protocol.md#service-and-method-names).
WRONG_METHODS = ("configure", "/nri.pkg.api.v1alpha1.Plugin/Configure", "Bogus", "", "Log")
# The plugin's request limit in the in-memory trunk tests: small, so oversized
# frames are cheap to send in full.
FUZZ_REQUEST_LIMIT = 8192

ODD_MESSAGE = "StreamID must be odd for client initiated streams"
REUSED_MESSAGE = "StreamID cannot be re-used and must increment"


def oversize_message(length: int, limit: int) -> str:
    return f"message length {length} exceed maximum message size of {limit}"


@dataclass(frozen=True, slots=True)
class Answer:
    """The Response a stream must get: its code and its message (exact, or a prefix)."""

    code: int
    message: str | None = None
    prefix: str = ""
    method: str = ""  # for OK answers: the method whose response type the payload is

    def matches(self, code: int, message: str) -> bool:
        if code != self.code:
            return False
        if self.message is not None:
            return message == self.message
        return message.startswith(self.prefix)


@dataclass(frozen=True, slots=True)
class SentFrame:
    """One ttrpc frame written on conn 1 (its header may announce an oversized body)."""

    stream_id: int
    msg_type: int
    flags: int
    body: bytes

    def __repr__(self) -> str:
        body = self.body if len(self.body) <= 64 else self.body[:32] + b"..."
        return (f"SentFrame(stream_id={self.stream_id}, msg_type={self.msg_type}, "
                f"flags={self.flags}, len={len(self.body)}, body={body!r})")

    @property
    def wire(self) -> bytes:
        return ttrpc.HEADER.pack(len(self.body), self.stream_id, self.msg_type, self.flags) \
            + self.body


@dataclass(frozen=True, slots=True)
class HostileStream:
    frames: tuple[SentFrame, ...]
    data: bytes = field(repr=False)  # everything written to the socket, in order
    reads: tuple[int, ...]  # sizes of the reads the plugin gets (the rest in one)
    tail: str  # "" | "partial-header" | "partial-payload" | "oversized-mux"


# -- the reference ---------------------------------------------------------------------


def classify_request(body: bytes) -> Answer:
    """What a ttrpc server must answer to a Request frame that opened a valid stream."""
    request = ttrpc_pb2.Request()
    try:
        request.ParseFromString(body)
    except (DecodeError, ValueError):
        return Answer(Code.INVALID_ARGUMENT, prefix="unmarshal request error")
    if request.service != PLUGIN_SERVICE:
        return Answer(Code.UNIMPLEMENTED, f"service {request.service}")
    if request.method not in INPUT_TYPES:
        return Answer(Code.UNIMPLEMENTED, f"method {request.method}")
    input_type = INPUT_TYPES[request.method]
    try:
        input_type().ParseFromString(request.payload)
    except (DecodeError, ValueError):
        return Answer(Code.INTERNAL, prefix=f"cannot decode {input_type.__name__}")
    return Answer(Code.OK, "", method=request.method)


def expected_answers(frames: tuple[SentFrame, ...], limit: int) -> list[tuple[int, Answer]]:
    """(stream id, answer) for every frame that must be answered, in frame order."""
    last = 0
    out: list[tuple[int, Answer]] = []
    for frame in frames:
        if len(frame.body) > limit:
            # Read and discarded whatever its type; only a Request is answered
            # (docs/protocol.md#what-a-go-ttrpc-peer-answers).
            if frame.msg_type == ttrpc.MessageType.REQUEST:
                out.append((frame.stream_id, Answer(Code.RESOURCE_EXHAUSTED,
                                                    oversize_message(len(frame.body), limit))))
            continue
        if frame.msg_type != ttrpc.MessageType.REQUEST:
            continue  # Response, Data, unknown types: ignored (docs/protocol.md#hostile-input)
        if frame.stream_id % 2 == 0:
            out.append((frame.stream_id, Answer(Code.INVALID_ARGUMENT, ODD_MESSAGE)))
            continue
        if frame.stream_id <= last:
            out.append((frame.stream_id, Answer(Code.INVALID_ARGUMENT, REUSED_MESSAGE)))
            continue
        last = frame.stream_id
        out.append((frame.stream_id, classify_request(frame.body)))
    return out


# -- strategies ------------------------------------------------------------------------


def _samples() -> dict[str, list[bytes]]:
    """Valid payloads per method: empty, and realistic ones built from the recorded template."""
    pod, container = template()
    samples: dict[str, list[bytes]] = {name: [b""] for name in METHODS}
    for name, cls in INPUT_TYPES.items():
        msg = cls()
        fields = msg.DESCRIPTOR.fields_by_name
        if "pod" in fields:
            msg.pod.CopyFrom(pod)  # type: ignore[attr-defined]
        if "container" in fields:
            msg.container.CopyFrom(container)  # type: ignore[attr-defined]
        if msg.ByteSize():
            samples[name].append(msg.SerializeToString())
    samples["Configure"].append(api.ConfigureRequest(
        runtime_name="containerd", runtime_version="2.1.9", request_timeout=2000,
        registration_timeout=5000).SerializeToString())
    samples["Configure"].append(api.ConfigureRequest(
        runtime_name="x", runtime_version="not a version", NRI_version="v99.x").SerializeToString())
    samples["Synchronize"].append(api.SynchronizeRequest(pods=[pod], containers=[container],
                                                         more=True).SerializeToString())
    samples["Synchronize"].append(api.SynchronizeRequest(pods=[pod]).SerializeToString())
    for event in (0, 4, 11, 14, 99, -1):
        # Raw numbers, 99 and -1 outside the Event enum on purpose: the plugin must take them.
        change = api.StateChangeEvent(event=event, pod=pod, container=container)  # type: ignore[arg-type]
        samples["StateChange"].append(change.SerializeToString())
    return samples


SAMPLES = _samples()


@st.composite
def _envelope(draw: st.DrawFn) -> bytes:
    service = draw(st.one_of(st.just(PLUGIN_SERVICE), st.just(PLUGIN_SERVICE),
                             st.sampled_from(OTHER_SERVICES), st.text(max_size=12)))
    method = draw(st.one_of(st.sampled_from(METHODS), st.sampled_from(METHODS),
                            st.sampled_from(WRONG_METHODS), st.text(max_size=12)))
    samples = SAMPLES.get(method, [b""])
    payload = draw(st.one_of(
        st.sampled_from(samples),
        st.binary(max_size=48),  # protobuf or not: the reference decides
        st.sampled_from(samples).flatmap(lambda p: st.integers(0, len(p)).map(lambda n: p[:n])),
    ))
    request = ttrpc_pb2.Request(
        service=service, method=method, payload=payload,
        timeout_nano=draw(st.one_of(st.just(2_000_000_000),
                                    st.integers(-(2**63), 2**63 - 1))))
    for key, value in draw(st.lists(st.tuples(st.text(max_size=8), st.text(max_size=8)),
                                    max_size=3)):
        request.metadata.add(key=key, value=value)
    data: bytes = request.SerializeToString()
    return data


_BODY = st.one_of(
    _envelope(), _envelope(), _envelope(),
    st.binary(max_size=40),  # garbage envelope
    _envelope().flatmap(lambda e: st.integers(0, max(0, len(e) - 1)).map(lambda n: e[:n])),
)
_TYPE = st.one_of(st.just(int(ttrpc.MessageType.REQUEST)), st.just(int(ttrpc.MessageType.REQUEST)),
                  st.just(int(ttrpc.MessageType.REQUEST)), st.just(int(ttrpc.MessageType.DATA)),
                  st.just(int(ttrpc.MessageType.RESPONSE)), st.integers(0, 255))
_ID_KIND = st.sampled_from(("next", "next", "next", "skip", "even", "reuse", "random"))


def _assign_id(kind: str, top: int, draw: st.DrawFn) -> int:
    fresh = top + 1 if top % 2 == 0 else top + 2
    if kind == "skip":
        fresh += 2 * draw(st.integers(1, 1000))
    elif kind == "even":
        return draw(st.sampled_from((0, min(fresh + 1, 2**32 - 2))))
    elif kind == "reuse":
        return draw(st.integers(0, top))
    elif kind == "random":
        return draw(st.integers(0, 2**32 - 1))
    return min(fresh, 2**32 - 1)


@st.composite
def _frames(draw: st.DrawFn) -> tuple[SentFrame, ...]:
    frames: list[SentFrame] = []
    top = 0
    for _ in range(draw(st.integers(1, 12))):
        sid = _assign_id(draw(_ID_KIND), top, draw)
        top = max(top, sid)
        msg_type = draw(_TYPE)
        flags = draw(st.one_of(st.just(0), st.integers(0, 255)))
        if draw(st.integers(0, 15)) == 0:  # oversized, sent in full
            body = b"\x0a" * draw(st.integers(FUZZ_REQUEST_LIMIT + 1, FUZZ_REQUEST_LIMIT + 64))
        else:
            body = draw(_BODY)
        frames.append(SentFrame(sid, msg_type, flags, body))
    return tuple(frames)


def _mux(conn_id: int, payload: bytes) -> bytes:
    return mux.HEADER.pack(conn_id, len(payload)) + payload


# Whole ttrpc frames for conn 2, where the plugin is the client: Responses and
# Data frames for streams it never opened, which it must log and drop.
_CONN2_FRAME = st.builds(
    lambda sid, kind, body: ttrpc.HEADER.pack(len(body), sid, kind, 0) + body,
    st.integers(0, 2**32 - 1), st.sampled_from((1, 2, 3, 7)), st.binary(max_size=24))
_NOISE = st.one_of(
    st.tuples(st.sampled_from((0, 3, 7, 0xFFFFFFFF)), st.binary(max_size=32)),
    st.tuples(st.just(mux.PLUGIN_SERVICE_CONN), st.just(b"")),  # zero-length frame
    st.tuples(st.just(mux.RUNTIME_SERVICE_CONN), _CONN2_FRAME),
).map(lambda t: _mux(*t))


@st.composite
def hostile_streams(draw: st.DrawFn) -> HostileStream:
    frames = draw(_frames())
    parts: list[bytes] = []
    for frame in frames:
        wire = frame.wire
        cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(wire) - 1)), max_size=3))))
        pieces = [wire[a:b] for a, b in zip([0, *cuts], [*cuts, len(wire)], strict=True)]
        for piece in pieces:
            if piece:
                parts.append(_mux(mux.PLUGIN_SERVICE_CONN, piece))
            parts.extend(draw(st.lists(_NOISE, max_size=2)))
    tail = draw(st.sampled_from(("", "", "", "partial-header", "partial-payload",
                                 "oversized-mux")))
    if tail == "partial-header":
        parts.append(mux.HEADER.pack(mux.PLUGIN_SERVICE_CONN, 20)[: draw(st.integers(1, 7))])
    elif tail == "partial-payload":
        parts.append(mux.HEADER.pack(mux.PLUGIN_SERVICE_CONN, 20) + b"\0" * 9)
    elif tail == "oversized-mux":
        parts.append(mux.HEADER.pack(mux.PLUGIN_SERVICE_CONN, mux.MAX_MUX_PAYLOAD_BYTES + 1))
    data = b"".join(parts)
    reads = tuple(draw(st.lists(st.integers(1, max(1, len(data))), max_size=8)))
    return HostileStream(frames, data, reads, tail)


def split_reads(data: bytes, reads: tuple[int, ...]) -> list[bytes]:
    out: list[bytes] = []
    pos = 0
    for size in reads:
        if pos >= len(data):
            break
        out.append(data[pos:pos + size])
        pos += size
    if pos < len(data):
        out.append(data[pos:])
    return out


def answer_counts(answers: list[tuple[int, Answer]]) -> Counter[tuple[int, int]]:
    return Counter((sid, a.code) for sid, a in answers)
