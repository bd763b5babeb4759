"""Hostile input from the runtime side: frames a plugin must survive
(docs/protocol.md#hostile-input).

`probe_plugin` sends, to one connected plugin, a sequence of malformed or
unexpected frames and records how the plugin answered each. None of them
should make a correct plugin close the connection:

| probe               | what is sent                                     | expected              |
|---------------------|--------------------------------------------------|-----------------------|
| unknown-mux-conn    | mux frames for conn 0 and conn 7                 | dropped               |
| empty-mux-frame     | a zero-length mux frame on conn 1                | ignored               |
| unknown-frame-type  | ttrpc frame of type 9 on conn 1                  | ignored               |
| data-frame          | ttrpc Data frame on a stream that never existed  | ignored               |
| even-stream-id      | a Request on stream id 2                         | InvalidArgument (3)   |
| garbage-envelope    | a Request whose body is not a ttrpc.Request      | InvalidArgument (3)   |
| garbage-payload     | StateChange with an undecodable payload          | Internal (13)         |
| unknown-service     | service `nri.pkg.api.v1alpha1.Bogus`             | 12 `service <name>`   |
| unknown-method      | Plugin method `Bogus`                            | 12 `method <name>`    |
| unknown-event       | StateChange event 99, with trace metadata        | OK                    |
| fragmented-request  | a StateChange split over 3 mux frames, with a    | OK                    |
|                     | frame for another conn in between                |                       |
| oversized-request   | a Request announcing 16 MiB + 1 (sent in full)   | ResourceExhausted (8) |

`send_oversized_mux_frame` is the one probe a plugin must answer by closing
the socket (a mux length above 16 MiB + 8).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from bridge.errors import ConnectionClosed
from bridge.proto.nri import api_pb2 as api
from bridge.simulator.connection import PLUGIN_SERVICE, PluginConnection, PluginFatal
from bridge.wire import envelope, mux, ttrpc
from bridge.wire.status import Code

log = logging.getLogger(__name__)

BOGUS_SERVICE = "nri.pkg.api.v1alpha1.Bogus"
BOGUS_METHOD = "Bogus"
# Above the plugin's 16 MiB request allowance for v0.6 runtimes' oversized Synchronize.
OVERSIZED_REQUEST_BYTES = (16 << 20) + 1
TRACE_METADATA = (("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),)


@dataclass(frozen=True, slots=True)
class ProbeOutcome:
    probe: str
    code: int | None  # the status the plugin answered, None if no answer is expected
    message: str
    ok: bool  # the plugin behaved as docs/protocol.md#hostile-input says it should


def _frame(msg_type: int, stream_id: int, data: bytes, flags: int = 0) -> bytes:
    # Built by hand: the codec refuses to encode Data frames, on purpose.
    return ttrpc.HEADER.pack(len(data), stream_id, msg_type, flags) + data


def _mux(conn_id: int, payload: bytes) -> bytes:
    return mux.HEADER.pack(conn_id, len(payload)) + payload


async def probe_plugin(conn: PluginConnection, timeout_s: float = 2.0) -> list[ProbeOutcome]:
    """Send every probe of the module table; stops early if the plugin goes away."""
    trunk = conn.trunk
    if trunk is None:
        raise PluginFatal("plugin has no connection")
    outcomes: list[ProbeOutcome] = []

    def silent(name: str, data: bytes) -> None:
        trunk.send_raw(data)
        outcomes.append(ProbeOutcome(name, None, "sent", True))

    async def answered(name: str, data: bytes, expected: int, text: str | None = None,
                       stream_id: int | None = None,
                       wire: Callable[[bytes], bytes] | None = None) -> None:
        reply = await conn.call_raw(data, timeout_s, stream_id=stream_id, wire=wire)
        ok = reply.code == expected and (text is None or reply.message == text)
        outcomes.append(ProbeOutcome(name, reply.code, reply.message, ok))

    def request(service: str, method: str, payload: bytes = b"",
                metadata: tuple[tuple[str, str], ...] = ()) -> bytes:
        return envelope.encode_request(envelope.Request(
            service, method, payload, timeout_nano=int(timeout_s * 1e9), metadata=metadata))

    try:
        silent("unknown-mux-conn", _mux(0, b"\x00garbage") + _mux(7, b"\xff" * 32))
        silent("empty-mux-frame", _mux(mux.PLUGIN_SERVICE_CONN, b""))
        silent("unknown-frame-type", _mux(mux.PLUGIN_SERVICE_CONN, _frame(9, 0x7FFFFFF1, b"x")))
        silent("data-frame", _mux(mux.PLUGIN_SERVICE_CONN,
                                  _frame(ttrpc.MessageType.DATA, 0x7FFFFFF3, b"\x00\x01",
                                         ttrpc.FLAG_REMOTE_CLOSED)))
        await answered("even-stream-id", request(PLUGIN_SERVICE, "StateChange"),
                       Code.INVALID_ARGUMENT, stream_id=2)
        await answered("garbage-envelope", b"\xff\xff\xff\xff", Code.INVALID_ARGUMENT)
        await answered("garbage-payload", request(PLUGIN_SERVICE, "StateChange", b"\x0a\xff"),
                       Code.INTERNAL)
        await answered("unknown-service", request(BOGUS_SERVICE, "Configure"),
                       Code.UNIMPLEMENTED, f"service {BOGUS_SERVICE}")
        await answered("unknown-method", request(PLUGIN_SERVICE, BOGUS_METHOD),
                       Code.UNIMPLEMENTED, f"method {BOGUS_METHOD}")
        # 99 is no event at all: the cast lets the test send what the enum does not allow.
        event99 = api.StateChangeEvent(event=cast(api.Event, 99)).SerializeToString()
        await answered("unknown-event",
                       request(PLUGIN_SERVICE, "StateChange", event99, TRACE_METADATA), Code.OK)
        await answered("fragmented-request", request(PLUGIN_SERVICE, "StateChange", event99),
                       Code.OK, wire=_fragmented)
        await answered("oversized-request", b"\x00" * (OVERSIZED_REQUEST_BYTES),
                       Code.RESOURCE_EXHAUSTED)
    except (PluginFatal, ConnectionClosed) as exc:
        outcomes.append(ProbeOutcome("connection", None, f"plugin went away: {exc}", False))
    for outcome in outcomes:
        log.info("hostile probe %s -> %s %s", outcome.probe, outcome.code, outcome.message)
    return outcomes


def _fragmented(frame: bytes) -> bytes:
    """A ttrpc frame cut into three mux frames, another conn's frame in between
    (docs/protocol.md#the-connection-multiplexer)."""
    cut1, cut2 = 3, len(frame) // 2
    return (_mux(mux.PLUGIN_SERVICE_CONN, frame[:cut1]) + _mux(9, b"interleaved")
            + _mux(mux.PLUGIN_SERVICE_CONN, frame[cut1:cut2])
            + _mux(mux.PLUGIN_SERVICE_CONN, frame[cut2:]))


def send_oversized_mux_frame(conn: PluginConnection) -> None:
    """Announce a mux payload of 16 MiB + 9 bytes; the plugin must close the socket."""
    if conn.trunk is None:
        raise PluginFatal("plugin has no connection")
    conn.trunk.send_raw(mux.HEADER.pack(mux.PLUGIN_SERVICE_CONN, mux.MAX_MUX_PAYLOAD_BYTES + 1))
