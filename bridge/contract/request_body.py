"""The webhook request body, encoded once: what the bridge POSTs for an event, as bytes.

Owns: the one encoder of the request envelope — its keys and their order, and how each payload
key of the catalogue (`REQUEST_PAYLOAD`) is taken from the event's request message. Everything
that produces an envelope uses it: the webhook calls (bytes) and recordings (the document
decoded from those bytes); tests/bridge/contract/test_request_body.py pins the bytes, for every
event, to the pydantic model, the recording and (Synchronize) the Event the policy server
builds itself for resync and the reconciler.
Must not: do I/O, or know how the body travels.

Payload rule: a message-valued key (`pod`, `container`, `linux_resources`, `adjust`, `owners`)
is present when the request sets it; a list-valued key (`pods`, `containers`, `update`,
`plugins`) is always present, `[]` when empty.

The payload (pod, container, resources, ...) is converted and encoded once per event and
shared by every webhook the event goes to; only the envelope (uid, budget, dry_run) differs
per call, and it is spliced around the pre-encoded fragments. Pods are encoded once per pod
version: a pod sees many events (RunPodSandbox, then Create/Start/... for each container), so
a small cache keyed by pod id and checked against the pod's exact bytes saves converting and
encoding the same pod again.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import orjson
from google.protobuf.message import Message

from bridge.contract.adjustment import nri_adjustment_to_json
from bridge.contract.catalogue import API_VERSION, REQUEST_PAYLOAD
from bridge.contract.convert import to_json
from bridge.proto.nri import api_pb2 as api

# key -> that key's value, already JSON-encoded
Payload = dict[str, bytes]

# orjson: an order of magnitude faster than the stdlib encoder on a container's JSON tree
# (docs/performance.md#numbers-behind-the-code); UTF-8 out, nothing escaped beyond what JSON
# requires. Integer map keys (FieldOwners.simple) become strings, as the stdlib encoder and proto3
# JSON make them.


def encode(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)


# A node runs at most ~110 pods by default (kubelet maxPods); a little headroom, and
# removed pods age out instead of holding ~2.8 KB each.
POD_CACHE_SIZE = 160
# The envelope's keys in the order `envelope` writes them, then the payload's. The request's one
# declaration (request_structs, which types each key) is built in this order.
ENVELOPE = ("api_version", "uid", "event", "runtime", "budget_ms", "dry_run")
_PREFIX = b'{"api_version":' + encode(API_VERSION) + b',"uid":'


def _encode_pod(pod: api.PodSandbox) -> bytes:
    return encode(to_json(pod))


def _event_payload(event: str, req: Message, pod: Callable[[api.PodSandbox], bytes]) -> Payload:
    out: Payload = {}
    for key in REQUEST_PAYLOAD[event]:
        value = getattr(req, key)
        if key == "pod":
            if req.HasField("pod"):
                out[key] = pod(value)
        elif key == "adjust":
            if req.HasField("adjust"):
                out[key] = encode(nri_adjustment_to_json(value))
        elif req.DESCRIPTOR.fields_by_name[key].is_repeated:
            out[key] = encode([to_json(item) for item in value])
        elif req.HasField(key):
            out[key] = encode(to_json(value))
    return out


def event_payload(event: str, req: Message) -> Payload:
    """The payload keys REQUEST_PAYLOAD names for `event`, from its request message."""
    return _event_payload(event, req, _encode_pod)


class PayloadBuilder:
    """Encodes event payloads as `event_payload` does, with a pod cache (one per handler)."""

    def __init__(self, pod_cache_size: int = POD_CACHE_SIZE) -> None:
        self._pods: OrderedDict[str, tuple[bytes, bytes]] = OrderedDict()
        self._size = pod_cache_size

    def pod(self, pod: api.PodSandbox) -> bytes:
        raw = pod.SerializeToString(deterministic=True)
        hit = self._pods.get(pod.id)
        if hit is not None and hit[0] == raw:
            self._pods.move_to_end(pod.id)
            return hit[1]
        encoded = _encode_pod(pod)
        self._pods[pod.id] = (raw, encoded)
        if len(self._pods) > self._size:
            self._pods.popitem(last=False)
        return encoded

    def event(self, event: str, req: Message) -> Payload:
        return _event_payload(event, req, self.pod)

    def sync(self, pods: Sequence[api.PodSandbox], containers: Sequence[api.Container],
             ) -> Payload:
        return {"pods": b"[" + b",".join(self.pod(p) for p in pods) + b"]",
                "containers": encode([to_json(c) for c in containers])}


def envelope(event: str, uid: str, runtime: bytes, budget_ms: int, dry_run: bool,
             payload: Payload) -> bytes:
    """The request body: envelope fields first, then the pre-encoded payload.

    `runtime` is the encoded `runtime` object (`contract.capabilities.runtime_ref`),
    encoded once per connection by the webhook handler."""
    parts = [_PREFIX, encode(uid), b',"event":', encode(event), b',"runtime":', runtime,
             b',"budget_ms":', str(budget_ms).encode(),
             b',"dry_run":', b"true" if dry_run else b"false"]
    for key, value in payload.items():
        parts += (b',"', key.encode(), b'":', value)
    parts.append(b"}")
    return b"".join(parts)


if tuple(orjson.loads(envelope("Synchronize", "", b"{}", 0, False, {}))) != ENVELOPE:
    raise TypeError("envelope() must write the keys of ENVELOPE, in its order")


def envelope_document(event: str, uid: str, runtime: Mapping[str, Any], budget_ms: int,
                      dry_run: bool, payload: Payload) -> dict[str, Any]:
    """The same body as a JSON document (recordings)."""
    doc: dict[str, Any] = orjson.loads(envelope(event, uid, encode(runtime), budget_ms,
                                                dry_run, payload))
    return doc


# The envelope of a request made without a runtime or a bridge (the policy test kit's
# `make_request` and `send_pod`): the budget is what the bridge gives one call under the
# simulator's 2 s request timeout, as `try` runs it; a request says which runtime sent it, and
# one made up says the default profile's (containerd 2.1.9, without an NRI version or
# capabilities); it is not a dry run.
DEFAULT_BUDGET_MS = 1000
DEFAULT_RUNTIME: Mapping[str, Any] = MappingProxyType({"name": "containerd", "version": "2.1.9"})


def default_envelope(event: str, uid: str) -> dict[str, Any]:
    """The envelope fields of a made-up request for `event`, with no payload yet."""
    return envelope_document(event, uid, dict(DEFAULT_RUNTIME), DEFAULT_BUDGET_MS, False, {})
