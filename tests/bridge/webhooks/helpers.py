"""Shared builders for the webhook tests: specs, requests from the contract examples, contexts."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from google.protobuf.message import Message

from bridge.contract.adjustment import nri_adjustment_from_json
from bridge.contract.catalogue import EVENTS_BY_RPC, REQUEST_PAYLOAD
from bridge.contract.convert import fill
from bridge.nri.handler_api import EventContext, RuntimeInfo
from bridge.proto.nri import api_pb2 as api
from bridge.webhooks.specs import WebhookSpec, parse_webhooks

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "schemas" / "webhook" / "examples"
SCHEMAS = ROOT / "schemas" / "webhook" / "events"
RUNTIME = RuntimeInfo("containerd", "2.1.9", (0, 8, 0), "", 5.0, 2.0)


def example(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EXAMPLES / name).read_text())
    return data


def schema(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((SCHEMAS / name).read_text())
    return data


def spec(name: str = "policy", path: str = "/v1/policy", sock: object = "/run/test-policy.sock",
         **kw: Any) -> WebhookSpec:
    """A webhook spec POSTing to `path` on Unix socket `sock` (e.g. a PolicyDouble's)."""
    doc = {"name": name, "url": f"unix://{sock}{path}", **kw}
    return parse_webhooks([doc])[0]


def request(event: str, payload: dict[str, Any] | None = None) -> Message:
    """The NRI request message for `event`, built from the contract example."""
    doc = payload if payload is not None else example(f"{event}.request.json")
    msg: Message = getattr(api, f"{event}Request")()
    plain = {k: doc[k] for k in REQUEST_PAYLOAD[event] if k in doc and k != "adjust"}
    fill(msg, plain, "")
    if "adjust" in doc and "adjust" in REQUEST_PAYLOAD[event]:
        msg.adjust.CopyFrom(nri_adjustment_from_json(doc["adjust"]))  # type: ignore[attr-defined]
    return msg


def sync_objects() -> tuple[list[api.PodSandbox], list[api.Container]]:
    req = request("Synchronize")
    assert isinstance(req, api.SynchronizeRequest)
    return list(req.pods), list(req.containers)


def context(event: str, budget_s: float = 1.9,
            deferred: list[api.ContainerUpdate] | None = None) -> EventContext:
    sink = deferred if deferred is not None else []
    return EventContext(
        event=EVENTS_BY_RPC.get(event), name=event, uid=f"uid-{event}",
        deadline=asyncio.get_running_loop().time() + budget_s, runtime=RUNTIME,
        via_state_change=False, defer_updates=sink.extend)


CREATED_ID = example("CreateContainer.request.json")["container"]["id"]
OTHER_ID = "1646280cb406793ef07291af78ddadcbf4f5f35700c2007a9ac2c32b9d3718c6"
