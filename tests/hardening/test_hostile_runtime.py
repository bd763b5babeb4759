"""Hostile runtime input over a real socket: the plugin core (PluginRunner) against the simulator.

Complements tests/bridge/simulator/test_restart_hostile.py (the probe table of
bridge.simulator.hostile) with what it does not pin down: the exact answer
and message per probe, that silent probes get no frame at all, stream-id
reuse, Data frames on a call in flight, truncation with the socket open and
at EOF, the two request-size limits, an oversized Response on conn 2, and a
Synchronize that never ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bridge.contract.catalogue import NriEvent
from bridge.contract.plugin_lifecycle import Phase
from bridge.errors import RpcError
from bridge.nri import runtime_setup
from bridge.nri.handler_api import EventContext, Handler
from bridge.nri.update_routes import UpdateSettings
from bridge.proto.nri import api_pb2 as api
from bridge.simulator.connection import PLUGIN_SERVICE
from bridge.simulator.synthetic import synthetic_state
from bridge.transport.trunk import Trunk
from bridge.wire import envelope, mux, ttrpc
from bridge.wire.status import Code
from tests.bridge.simulator.harness import Harness, connected
from tests.waiting import until

from .wire_model import INPUT_TYPES, ODD_MESSAGE, REUSED_MESSAGE, oversize_message

pytestmark = pytest.mark.timeout(20)
TIMEOUT_S = 2.0


def _request(method: str, payload: bytes = b"", service_name: str = PLUGIN_SERVICE) -> bytes:
    return envelope.encode_request(envelope.Request(service_name, method, payload,
                                                    timeout_nano=int(TIMEOUT_S * 1e9)))


def _state_change(event: int = 99, **fields: Any) -> bytes:
    # A raw number (99 by default: outside the Event enum, on purpose).
    change = api.StateChangeEvent(event=event, **fields)  # type: ignore[arg-type]
    return _request("StateChange", change.SerializeToString())


def _replies(trunk: Trunk) -> list[ttrpc.Frame | ttrpc.OversizedFrame]:
    """Every frame the runtime side receives on conn 1 from now on (the plugin's answers)."""
    seen: list[ttrpc.Frame | ttrpc.OversizedFrame] = []
    forward = trunk.client.frame_received

    def record(frame: ttrpc.Frame | ttrpc.OversizedFrame) -> None:
        seen.append(frame)
        forward(frame)
    trunk.client.frame_received = record  # type: ignore[method-assign]
    return seen


def _trunks(h: Harness) -> tuple[Trunk, Trunk]:
    """(runtime side, plugin side) of the current connection."""
    session = h.runner.session
    assert h.conn.trunk is not None and session is not None and session.trunk is not None
    return h.conn.trunk, session.trunk


async def _still_serving(h: Harness, pod: api.PodSandbox, container: api.Container) -> None:
    result = await h.runtime.create_container(pod, container)
    assert result.ok, result.error
    assert h.conn.is_active and h.runtime.closed_plugins == [] and h.runtime.lost_plugins == []


async def test_every_method_answers_internal_to_a_payload_that_is_not_its_input(
        sock_path: Path, pod_and_container: tuple[api.PodSandbox, api.Container]) -> None:
    async with connected(sock_path, Handler(), "nri-v0.12") as h:
        runtime_side, _ = _trunks(h)
        replies = _replies(runtime_side)
        for method, input_type in sorted(INPUT_TYPES.items()):
            # A length-delimited field 1 cut short: no protobuf message decodes from it.
            reply = await h.conn.call_raw(_request(method, b"\x0a\xff"), TIMEOUT_S)
            assert reply.code == Code.INTERNAL, (method, reply)
            assert reply.message.startswith(f"cannot decode {input_type.__name__}: "), method
            assert reply.payload == b""
        assert len(replies) == len(INPUT_TYPES) == 18  # one answer each, nothing else
        await _still_serving(h, *pod_and_container)


async def test_stream_id_rules_and_silent_probes_get_exact_answers(
        sock_path: Path, pod_and_container: tuple[api.PodSandbox, api.Container]) -> None:
    async with connected(sock_path, Handler(), "nri-v0.12") as h:
        runtime_side, plugin_side = _trunks(h)
        replies = _replies(runtime_side)
        # Ignored, never answered (docs/protocol.md#hostile-input): unknown conns (a large one too),
        # zero-length frames, Response, Data and unknown frame types on streams never opened.
        runtime_side.send_raw(
            mux.HEADER.pack(0, 3) + b"abc" + mux.HEADER.pack(7, 1 << 20) + b"\xff" * (1 << 20)
            + mux.HEADER.pack(mux.PLUGIN_SERVICE_CONN, 0)
            + mux.encode_message(mux.PLUGIN_SERVICE_CONN, ttrpc.HEADER.pack(
                2, 0x7FFFFFF1, ttrpc.MessageType.RESPONSE, 0) + b"\x08\x01")
            + mux.encode_message(mux.PLUGIN_SERVICE_CONN, ttrpc.HEADER.pack(
                1, 0x7FFFFFF3, ttrpc.MessageType.DATA, ttrpc.FLAG_REMOTE_CLOSED) + b"x")
            + mux.encode_message(mux.PLUGIN_SERVICE_CONN, ttrpc.HEADER.pack(
                0, 0x7FFFFFF5, 0x42, 0)))
        # The handshake used stream ids 1 (Configure) and 3 (Synchronize).
        for sid, message in ((1, REUSED_MESSAGE), (3, REUSED_MESSAGE), (2, ODD_MESSAGE),
                             (4, ODD_MESSAGE)):
            reply = await h.conn.call_raw(_state_change(), TIMEOUT_S, stream_id=sid)
            assert (reply.code, reply.message) == (Code.INVALID_ARGUMENT, message), sid
        garbage = await h.conn.call_raw(b"\xff\xff\xff\xff", TIMEOUT_S)  # stream 5
        assert garbage.code == Code.INVALID_ARGUMENT
        assert garbage.message.startswith("unmarshal request error: ")
        for name, data, expected in (
                ("unknown service", _request("Configure", service_name="nri.pkg.api.v1alpha1."
                                                                       "Runtime"),
                 "service nri.pkg.api.v1alpha1.Runtime"),
                ("unknown method", _request("/nri.pkg.api.v1alpha1.Plugin/Configure"),
                 "method /nri.pkg.api.v1alpha1.Plugin/Configure")):
            reply = await h.conn.call_raw(data, TIMEOUT_S)
            assert (reply.code, reply.message) == (Code.UNIMPLEMENTED, expected), name
        assert [f.stream_id for f in replies] == [1, 3, 2, 4, 5, 7, 9]
        assert all(f.type == ttrpc.MessageType.RESPONSE for f in replies)
        assert plugin_side.pending_bytes == 0  # nothing of the ignored frames was kept
        await _still_serving(h, *pod_and_container)


class Gate(Handler):
    """CreateContainer waits until the test opens the gate (within its deadline)."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()

    async def create_container(self, ctx: EventContext, req: Any) -> api.CreateContainerResponse:
        self.entered.set()
        await self.gate.wait()
        response = api.CreateContainerResponse()
        response.adjust.env.add(key="GATE", value="open")
        return response


def _next_stream_id(trunk: Trunk) -> Callable[[], int]:
    """The stream id of the runtime's next request on conn 1, once it is written."""
    sent: list[int] = []
    forward = trunk.send_request

    def record(stream_id: int, data: bytes) -> None:
        sent.append(stream_id)
        forward(stream_id, data)
    trunk.send_request = record  # type: ignore[method-assign]
    return lambda: sent[-1]


async def test_data_frames_on_a_call_in_flight_are_ignored(
        sock_path: Path, pod_and_container: tuple[api.PodSandbox, api.Container]) -> None:
    handler = Gate()
    async with connected(sock_path, handler) as h:
        runtime_side, _ = _trunks(h)
        replies = _replies(runtime_side)
        last_id = _next_stream_id(runtime_side)
        event = asyncio.create_task(h.runtime.create_container(*pod_and_container))
        await asyncio.wait_for(handler.entered.wait(), TIMEOUT_S)
        sid = last_id()
        # The inputs that crash a Go ttrpc server (docs/protocol.md#hostile-input): Data on a
        # running unary stream.
        for flags in (ttrpc.FLAG_REMOTE_CLOSED, 0, ttrpc.FLAG_NO_DATA):
            runtime_side.send_raw(mux.encode_message(mux.PLUGIN_SERVICE_CONN, ttrpc.HEADER.pack(
                3, sid, ttrpc.MessageType.DATA, flags) + b"abc"))
        # A barrier instead of a sleep: a request sent after the Data frames is answered
        # (Unimplemented) only once the plugin has read, and ignored, everything before it.
        barrier = await h.conn.call_raw(_request("Barrier"), TIMEOUT_S)
        assert barrier.code == Code.UNIMPLEMENTED
        assert [f.stream_id for f in replies if f.stream_id == sid] == [] and not event.done()
        handler.gate.set()
        result = await event
        assert result.ok and result.container is not None and "GATE=open" in result.container.env
        # Exactly one answer on the call's stream, the real one (plus the barrier's).
        assert [f.stream_id for f in replies if f.stream_id == sid] == [sid]
        assert len(replies) == 2
        assert h.runtime.closed_plugins == []


async def test_a_cut_off_message_waits_for_the_rest_with_the_socket_open(
        sock_path: Path, pod_and_container: tuple[api.PodSandbox, api.Container]) -> None:
    async with connected(sock_path, Handler()) as h:
        runtime_side, plugin_side = _trunks(h)
        replies = _replies(runtime_side)
        body = _state_change(event=NriEvent.START_CONTAINER, pod=pod_and_container[0])
        frame = ttrpc.HEADER.pack(len(body), 101, ttrpc.MessageType.REQUEST, 0) + body
        runtime_side.send_raw(mux.encode_message(mux.PLUGIN_SERVICE_CONN, frame[:7]))
        runtime_side.send_raw(mux.encode_message(mux.PLUGIN_SERVICE_CONN, frame[7:40]))
        # The property is about time passing (there is no ttrpc-level timeout): a sleep, not
        # an event, and a load that stretches it only makes the check stronger.
        await asyncio.sleep(0.3)
        assert replies == [] and plugin_side.is_open and plugin_side.pending_bytes == 40
        runtime_side.send_raw(mux.encode_message(mux.PLUGIN_SERVICE_CONN, frame[40:]))
        await until(lambda: bool(replies), what="a reply arrives",
                    timeout_s=TIMEOUT_S)
        [answer] = replies
        assert isinstance(answer, ttrpc.Frame) and answer.stream_id == 101
        assert envelope.decode_response(answer.data).code == Code.OK
        assert plugin_side.pending_bytes == 0


TRUNCATIONS = {
    "mux header": mux.HEADER.pack(mux.PLUGIN_SERVICE_CONN, 40)[:5],
    "mux payload": mux.HEADER.pack(mux.PLUGIN_SERVICE_CONN, 40) + b"\x00" * 12,
    "ttrpc message": mux.encode_message(mux.PLUGIN_SERVICE_CONN, ttrpc.HEADER.pack(
        100, 101, ttrpc.MessageType.REQUEST, 0) + b"\x0a" * 20),
}


@pytest.mark.parametrize("cut", sorted(TRUNCATIONS))
async def test_eof_in_the_middle_of_a_frame_closes_and_reconnects(
        sock_path: Path, pod_and_container: tuple[api.PodSandbox, api.Container],
        cut: str) -> None:
    async with connected(sock_path, Handler()) as h:
        first_session = h.runner.session
        runtime_side, plugin_side = _trunks(h)
        runtime_side.send_raw(TRUNCATIONS[cut])
        h.conn.close("test: runtime dies mid-frame")
        await asyncio.wait_for(plugin_side.wait_closed(), TIMEOUT_S)
        assert plugin_side.close_reason == "connection closed by peer"
        second = await h.runtime.wait_plugin(5)
        assert second is not h.conn and second.label == "10-test"
        assert first_session is not None and first_session.state is Phase.CLOSED
        assert h.runner.session is not first_session and h.runner.reconnects == 1
        h.conn = second
        assert (await h.runtime.create_container(*pod_and_container)).ok


async def test_request_size_limits_answer_and_keep_the_connection(
        sock_path: Path, pod_and_container: tuple[api.PodSandbox, api.Container]) -> None:
    async with connected(sock_path, Handler(), "nri-v0.12") as h:
        runtime_side, plugin_side = _trunks(h)
        # Between 4 and 16 MiB: accepted on purpose, so a v0.6 runtime's unsplit
        # Synchronize is not dropped (docs/protocol.md#hostile-input, a deliberate deviation from
        # ttrpc).
        pod = api.PodSandbox(id="big", annotations={"pad": "x" * (5 << 20)})
        big = _state_change(event=99, pod=pod)
        assert len(big) > ttrpc.MAX_MESSAGE_BYTES
        assert (await h.conn.call_raw(big, TIMEOUT_S)).code == Code.OK
        # Above 16 MiB: read and discarded, ResourceExhausted on that stream
        # (docs/protocol.md#what-a-go-ttrpc-peer-answers).
        oversized = b"\x00" * ((16 << 20) + 1)
        reply = await h.conn.call_raw(oversized, TIMEOUT_S)
        assert (reply.code, reply.message) == (Code.RESOURCE_EXHAUSTED,
                                               oversize_message((16 << 20) + 1, 16 << 20))
        # The answer goes out when the header is read; the body is still being discarded.
        await until(lambda: plugin_side.pending_bytes == 0,
                    what="the plugin side has sent every byte",
                    timeout_s=TIMEOUT_S)
        assert runtime_side.is_open
        await _still_serving(h, *pod_and_container)


async def test_an_oversized_response_fails_that_call_and_keeps_the_connection(
        sock_path: Path, pod_and_container: tuple[api.PodSandbox, api.Container]) -> None:
    pod, container = pod_and_container
    # Route nri: the response poisoned here is UpdateContainers' own, on the NRI connection.
    async with connected(sock_path, Handler(), updates=UpdateSettings(route="nri"),
                         seed=lambda rt: rt.state.seed([pod], [container])) as h:
        runtime_side, plugin_side = _trunks(h)
        forward = runtime_side.server.frame_received
        poisoned: list[int] = []

        def answer_oversized_once(frame: ttrpc.Frame | ttrpc.OversizedFrame) -> None:
            if not poisoned and isinstance(frame, ttrpc.Frame):
                poisoned.append(frame.stream_id)
                header = ttrpc.HEADER.pack(ttrpc.MAX_MESSAGE_BYTES + 1, frame.stream_id,
                                           ttrpc.MessageType.RESPONSE, 0)
                runtime_side.send_raw(
                    mux.encode_message(mux.RUNTIME_SERVICE_CONN, header)
                    + mux.HEADER.pack(mux.RUNTIME_SERVICE_CONN, ttrpc.MAX_MESSAGE_BYTES + 1)
                    + b"\x00" * (ttrpc.MAX_MESSAGE_BYTES + 1))
            forward(frame)  # the real answer follows, for a stream that is finished by then
        runtime_side.server.frame_received = answer_oversized_once  # type: ignore[method-assign]
        update = api.ContainerUpdate(container_id=container.id)
        update.linux.resources.cpu.shares.value = 321
        with pytest.raises(RpcError) as refused:
            await h.runner.update_containers([update])
        assert refused.value.code == Code.RESOURCE_EXHAUSTED
        assert refused.value.message == f"response of {ttrpc.MAX_MESSAGE_BYTES + 1} bytes " \
                                        "exceeds the limit"
        assert (await h.runner.update_containers([update])).failed == []  # the next call works
        assert poisoned == [3]  # RegisterPlugin was 1
        assert plugin_side.is_open and plugin_side.pending_bytes == 0
        assert h.runtime.state.containers[container.id].linux.resources.cpu.shares.value == 321
        await _still_serving(h, pod, container)


class Recorder(Handler):
    def __init__(self) -> None:
        self.synced: list[tuple[int, int]] = []

    async def synchronize(self, ctx: EventContext, pods: Any, containers: Any) -> list[Any]:
        self.synced.append((len(pods), len(containers)))
        return []


async def test_a_synchronize_that_never_ends_buffers_a_bounded_amount(
        sock_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime_setup, "MAX_SYNC_OBJECTS", 50)
    handler = Recorder()
    async with connected(sock_path, handler, "nri-v0.12") as h:
        pods, containers = synthetic_state(10, 30)
        chunk = api.SynchronizeRequest(pods=pods, containers=containers, more=True)
        for _ in range(20):  # 600 containers announced, `more` every time
            reply = await h.conn.call_raw(_request("Synchronize", chunk.SerializeToString()),
                                          TIMEOUT_S)
            answer = api.SynchronizeResponse.FromString(reply.payload)
            assert reply.ok and answer.more and not answer.update
        final = api.SynchronizeRequest(containers=containers[:1], more=False)
        reply = await h.conn.call_raw(_request("Synchronize", final.SerializeToString()),
                                      TIMEOUT_S)
        assert reply.ok and not api.SynchronizeResponse.FromString(reply.payload).more
        # The handshake's own (empty) sync, then this one capped at 50 + 50 objects.
        assert handler.synced == [(0, 0), (50, 50)]
        assert len(h.runner.cache.pods) == 10  # unique ids: 10 pods repeated
        assert len(h.runner.cache.containers) == 30
