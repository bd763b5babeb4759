"""Recording: envelope + reply per event, redaction, and failures that never hurt serving."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec
import pytest

from bridge.contract import WebhookReply
from bridge.contract.catalogue import NriEvent
from bridge.contract.request_structs import WebhookRequest
from bridge.nri.handler_api import EventContext, EventRejected, Handler, RuntimeInfo
from bridge.nri.static import StaticHandler, StaticSettings
from bridge.proto.nri import api_pb2 as api
from bridge.record.recorder import REDACTED, Recorder, Redaction
from bridge.record.recording_handler import RecordingHandler
from tests.event_path import serve

NewRecorder = Callable[..., Recorder]
RUNTIME = RuntimeInfo("containerd", "2.1.9", (0, 8, 0), "", 5.0, 2.0)


def ctx(name: str, event: NriEvent | None) -> EventContext:
    loop = asyncio.get_running_loop()
    return EventContext(event=event, name=name, uid="u1", deadline=loop.time() + 1.9,
                        runtime=RUNTIME, via_state_change=False, defer_updates=lambda _: None)


def create_request() -> api.CreateContainerRequest:
    req = api.CreateContainerRequest()
    req.pod.id, req.pod.name, req.pod.namespace = "p1", "web", "default"
    req.pod.annotations["secret"] = "s3cr3t"
    req.container.id, req.container.name = "c1", "app"
    req.container.env.extend(["PATH=/bin", "TOKEN=abc"])
    return req


@pytest.fixture
def new_recorder() -> Iterator[NewRecorder]:
    """Make Recorders that the test's teardown closes (a Recorder keeps its file open)."""
    made: list[Recorder] = []

    def make(path: str, *redaction: Redaction) -> Recorder:
        made.append(Recorder(path, *redaction))
        return made[-1]

    yield make
    for each in made:
        each.close()


def lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_records_envelope_and_reply_that_validate(tmp_path: Path,
        new_recorder: NewRecorder) -> None:
    out = tmp_path / "rec.jsonl"
    settings = StaticSettings.parse({"adjust": {"env": [{"key": "X", "value": "1"}]}})
    handler = RecordingHandler(StaticHandler(settings), new_recorder(str(out)))
    assert NriEvent.CREATE_CONTAINER in handler.wanted_events()
    resp = await serve(handler, ctx("CreateContainer", NriEvent.CREATE_CONTAINER),
                                          create_request())
    assert isinstance(resp, api.CreateContainerResponse) and resp.adjust.env[0].key == "X"
    [rec] = lines(out)
    assert rec["event"] == "CreateContainer" and rec["outcome"] == "answered"
    msgspec.json.decode(json.dumps(rec["request"]), type=WebhookRequest)  # the declaration takes it
    WebhookReply.model_validate(rec["reply"])
    assert rec["reply"] == {"adjust": {"env": [{"key": "X", "value": "1"}]}}
    assert rec["request"]["container"]["env"] == ["PATH=/bin", "TOKEN=abc"]  # type: ignore[index]


async def test_redaction_hides_values_keeps_keys(tmp_path: Path,
        new_recorder: NewRecorder) -> None:
    out = tmp_path / "rec.jsonl"
    handler = RecordingHandler(StaticHandler(StaticSettings()),
                               new_recorder(str(out), Redaction(annotations=True, env=True)))
    handler.wanted_events()
    await serve(handler, ctx("CreateContainer", NriEvent.CREATE_CONTAINER),
                                   create_request())
    request = lines(out)[0]["request"]
    assert request["pod"]["annotations"] == {"secret": REDACTED}  # type: ignore[index]
    assert request["container"]["env"] == [f"PATH={REDACTED}", f"TOKEN={REDACTED}"]  # type: ignore[index]
    assert "s3cr3t" not in out.read_text() and "abc" not in out.read_text()


class Rejecting(Handler):
    async def create_container(self, ctx: EventContext, req: api.CreateContainerRequest,
                               ) -> api.CreateContainerResponse | None:
        raise EventRejected("no privileged pods")


async def test_rejection_is_recorded_and_still_raised(tmp_path: Path,
        new_recorder: NewRecorder) -> None:
    out = tmp_path / "rec.jsonl"
    handler = RecordingHandler(Rejecting(), new_recorder(str(out)))
    handler.wanted_events()
    with pytest.raises(EventRejected):
        await serve(handler, ctx("CreateContainer", NriEvent.CREATE_CONTAINER),
                                       create_request())
    assert lines(out)[0]["reply"] == {"reject": {"reason": "no privileged pods"}}


async def test_disk_full_never_breaks_serving(new_recorder: NewRecorder) -> None:
    recorder = new_recorder("/dev/full")  # every write fails with ENOSPC
    settings = StaticSettings.parse({"adjust": {"env": [{"key": "X", "value": "1"}]}})
    handler = RecordingHandler(StaticHandler(settings), recorder)
    handler.wanted_events()
    for _ in range(3):
        resp = await serve(handler, ctx("CreateContainer", NriEvent.CREATE_CONTAINER),
                                              create_request())
        assert isinstance(resp, api.CreateContainerResponse) and resp.adjust.env[0].key == "X"
    assert recorder.written == 0 and recorder.dropped == 3


async def test_events_the_inner_handler_ignores_are_recorded_as_no_change(tmp_path: Path,
        new_recorder: NewRecorder) -> None:
    out = tmp_path / "rec.jsonl"
    handler = RecordingHandler(Rejecting(), new_recorder(str(out)))
    assert NriEvent.REMOVE_CONTAINER in handler.wanted_events()
    full = create_request()
    req = api.RemoveContainerRequest(pod=full.pod, container=full.container)
    removed = await serve(handler, ctx("RemoveContainer", NriEvent.REMOVE_CONTAINER), req)
    assert removed is None
    assert lines(out)[0]["reply"] == {} and lines(out)[0]["event"] == "RemoveContainer"
