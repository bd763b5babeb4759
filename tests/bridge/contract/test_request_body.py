"""One webhook envelope: for every event, the bytes the webhook handler POSTs are taken by the
event's published request schema and hold the keys of the request's one declaration in its
order, the recording of the same event holds the same JSON, and the policy server reads them
into the same Event it builds itself for resync and the reconciler (Synchronize, from the
bridge's state in the same payload form).

The hot path is the real one (WebhookHandler -> Webhook -> request_body.envelope) with the
HTTP exchange replaced by a client that keeps the body; the recording is the real
RecordingHandler around it, with a recorder that keeps the document."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, cast

import orjson
import pytest

from bridge.contract.catalogue import EVENT_NAMES, REQUEST_PAYLOAD
from bridge.contract.request_structs import WebhookRequest
from bridge.contract.schema import SCHEMA_DIR as SCHEMAS
from bridge.nri.event_call import EventCall
from bridge.proto.nri import api_pb2 as api
from bridge.record.recorder import Recorder
from bridge.record.recording_handler import RecordingHandler
from bridge.webhooks.client import PolicyClient
from bridge.webhooks.webhook import Webhook
from bridge.webhooks.webhook_handler import WebhookHandler
from policy_server.engine.request import parse_request
from tests.bridge.webhooks.helpers import context, request, spec
from tests.json_schemas import validate
from tests.policy_server.factory import synchronize_event

# Per call; the envelope keys that are per call rather than per event.
PER_CALL = ("uid", "budget_ms", "runtime")


class KeepingClient:
    """Stands in for the HTTP exchange: keeps each body, answers "no change"."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    async def post_raw(self, body: bytes, budget_s: float) -> bytes:
        self.bodies.append(body)
        return b"{}"

    async def aclose(self) -> None:
        return None


class KeepingRecorder(Recorder):
    def __init__(self, path: Path) -> None:
        super().__init__(str(path))
        self.documents: list[dict[str, Any]] = []

    def write(self, envelope: dict[str, Any], reply: dict[str, Any], outcome: str,
              latency_ms: float) -> None:
        self.documents.append(envelope)


def _validate_without_lists() -> api.ValidateContainerAdjustmentRequest:
    """ValidateContainerAdjustment with no updates and no plugins: the lists are sent empty."""
    full = request("ValidateContainerAdjustment")
    assert isinstance(full, api.ValidateContainerAdjustmentRequest)
    req = api.ValidateContainerAdjustmentRequest()
    req.CopyFrom(full)
    del req.update[:]
    del req.plugins[:]
    return req


CASES = [(name, name) for name in EVENT_NAMES] + [
    ("ValidateContainerAdjustment", "ValidateContainerAdjustment-empty-lists")]


@pytest.mark.parametrize(("event", "case"), CASES, ids=[case for _, case in CASES])
async def test_every_encoding_of_the_envelope_is_the_same(event: str, case: str,
                                                          tmp_path: Path) -> None:
    client = KeepingClient()
    hook = Webhook(spec(events=[event]), client=cast(PolicyClient, client))
    recorder = KeepingRecorder(tmp_path / "recording.jsonl")
    handler = RecordingHandler(WebhookHandler([], webhooks=[hook]), recorder)
    handler.wanted_events()
    call: EventCall = context(event)
    if event == "Synchronize":
        sync = request("Synchronize")
        assert isinstance(sync, api.SynchronizeRequest)
        call = dataclasses.replace(call, pods=list(sync.pods), containers=list(sync.containers))
    else:
        req = _validate_without_lists() if case.endswith("empty-lists") else request(event)
        call = dataclasses.replace(call, request=req)
    await handler.handle(call)

    [body] = client.bodies
    sent = orjson.loads(body)
    # The declaration's keys, in its order: the envelope, then the event's payload keys.
    order = WebhookRequest.__struct_fields__
    assert set(sent) <= set(order)
    assert list(sent)[:6] == list(order[:6]) == ["api_version", "uid", "event", "runtime",
                                                  "budget_ms", "dry_run"]
    assert list(sent)[6:] == [k for k in REQUEST_PAYLOAD[event] if k in sent]
    validate(sent, SCHEMAS / "events" / f"{event}.request.schema.json")
    # The recording holds what was sent (the budget is the call's, the recording's the event's).
    [recorded] = recorder.documents
    assert _per_event(recorded) == _per_event(sent)
    assert list(recorded) == list(sent)
    if case.endswith("empty-lists"):
        assert sent["update"] == [] and sent["plugins"] == [] and recorded["update"] == []
    # The policy server's one request path reads the bytes.
    received = parse_request(body)
    assert received.name.value == event and received.uid == sent["uid"]
    if event == "Synchronize":
        # resync and the reconciler build their Synchronize from the bridge's state (GET
        # /v1/state: the same payload form) through the same models and conversion.
        for source in ("resync", "reconcile"):
            own = synchronize_event(source, sent["pods"], sent["containers"])
            assert own.pods == received.pods and own.containers == received.containers
            assert own.name is received.name and own.uid.startswith(f"{source}-")


def _per_event(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in PER_CALL}
