"""Request envelopes: NRI protobuf in, the contract's JSON bytes out.

The event payload (pod, container, resources, ...) is converted once per
event and shared by every webhook the event goes to; only the envelope
(uid, budget, dry_run) differs per call. Serialization is plain `json.dumps`
of `to_json` output, the fast path (no pydantic on the hot path).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from google.protobuf.message import Message

from bridge.contract.adjustment import adjustment_to_json
from bridge.contract.envelope import API_VERSION
from bridge.contract.events import REQUEST_PAYLOAD
from bridge.nri.convert import to_json
from bridge.proto.nri import api_pb2 as api

Payload = dict[str, Any]


def event_payload(event: str, req: Message) -> Payload:
    """The payload keys REQUEST_PAYLOAD names for `event`, taken from its request message."""
    out: Payload = {}
    for key in REQUEST_PAYLOAD[event]:
        value = getattr(req, key)
        if key == "adjust":
            if req.HasField("adjust"):
                out[key] = adjustment_to_json(value)
        elif key in ("update", "plugins"):
            out[key] = [to_json(item) for item in value]
        elif req.HasField(key):
            out[key] = to_json(value)
    return out


def sync_payload(pods: Sequence[api.PodSandbox], containers: Sequence[api.Container]) -> Payload:
    return {"pods": [to_json(p) for p in pods], "containers": [to_json(c) for c in containers]}


def envelope(event: str, uid: str, runtime: tuple[str, str], budget_ms: int, dry_run: bool,
             payload: Payload) -> bytes:
    doc: dict[str, Any] = {
        "api_version": API_VERSION,
        "uid": uid,
        "event": event,
        "runtime": {"name": runtime[0], "version": runtime[1]},
        "budget_ms": budget_ms,
        "dry_run": dry_run,
    }
    doc.update(payload)
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


def truncated_json(value: Any, limit: int) -> str:
    """Compact JSON for a log line, cut at `limit` characters (never a whole reply)."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + f"...(+{len(text) - limit} chars)"
