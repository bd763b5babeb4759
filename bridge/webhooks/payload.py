"""Request envelopes: NRI protobuf in, the contract's JSON bytes out.

The payload (pod, container, resources, ...) is converted and encoded once
per event and shared by every webhook the event goes to; only the envelope
(uid, budget, dry_run) differs per call, and it is spliced around the
pre-encoded fragments. Pods are encoded once per pod version: a pod sees
many events (RunPodSandbox, then Create/Start/... for each container), so a
small cache keyed by pod id and checked against the pod's exact bytes saves
converting and encoding the same pod again.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import orjson
from google.protobuf.message import Message

from bridge.contract.adjustment import adjustment_to_json
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
_PREFIX = b'{"api_version":' + encode(API_VERSION) + b',"uid":'


class PayloadBuilder:
    """Encodes event payloads; owns the pod cache (one per handler)."""

    def __init__(self, pod_cache_size: int = POD_CACHE_SIZE) -> None:
        self._pods: OrderedDict[str, tuple[bytes, bytes]] = OrderedDict()
        self._size = pod_cache_size

    def pod(self, pod: api.PodSandbox) -> bytes:
        raw = pod.SerializeToString(deterministic=True)
        hit = self._pods.get(pod.id)
        if hit is not None and hit[0] == raw:
            self._pods.move_to_end(pod.id)
            return hit[1]
        encoded = encode(to_json(pod))
        self._pods[pod.id] = (raw, encoded)
        if len(self._pods) > self._size:
            self._pods.popitem(last=False)
        return encoded

    def event(self, event: str, req: Message) -> Payload:
        """The payload keys REQUEST_PAYLOAD names for `event`, from its request message."""
        out: Payload = {}
        for key in REQUEST_PAYLOAD[event]:
            value = getattr(req, key)
            if key == "pod":
                if req.HasField("pod"):
                    out[key] = self.pod(value)
            elif key == "adjust":
                if req.HasField("adjust"):
                    out[key] = encode(adjustment_to_json(value))
            elif key in ("update", "plugins"):
                out[key] = encode([to_json(item) for item in value])
            elif req.HasField(key):
                out[key] = encode(to_json(value))
        return out

    def sync(self, pods: Sequence[api.PodSandbox], containers: Sequence[api.Container],
             ) -> Payload:
        return {"pods": b"[" + b",".join(self.pod(p) for p in pods) + b"]",
                "containers": encode([to_json(c) for c in containers])}


def envelope(event: str, uid: str, runtime: bytes, budget_ms: int, dry_run: bool,
             payload: Payload) -> bytes:
    """The request body: envelope fields first, then the pre-encoded payload.

    `runtime` is the encoded `runtime` object (`contract.capabilities.runtime_ref`),
    encoded once per connection by the handler."""
    parts = [_PREFIX, encode(uid), b',"event":', encode(event), b',"runtime":', runtime,
             b',"budget_ms":', str(budget_ms).encode(),
             b',"dry_run":', b"true" if dry_run else b"false"]
    for key, value in payload.items():
        parts += (b',"', key.encode(), b'":', value)
    parts.append(b"}")
    return b"".join(parts)


def truncated_json(value: Any, limit: int) -> str:
    """Compact JSON for a log line, cut to `limit` bytes there (never a whole reply)."""
    return clip(json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str), limit)


def clip(text: str, limit: int) -> str:
    """`text` cut so that, escaped into a JSON log line, it takes at most `limit` bytes.

    Counted escaped because that is what a log line holds: `"` takes 2 bytes, a
    control character or a snowman 6, an emoji 12 (`\\ud83d\\ude00`).
    """
    if len(json.dumps(text)) - 2 <= limit:
        return text
    budget, size = limit - _CUT_MARK_BYTES, 0
    for i, char in enumerate(text):
        size += 1 if " " <= char <= "~" and char not in '"\\' else len(json.dumps(char)) - 2
        if size > budget:
            return f"{text[:i]}...(+{len(text) - i} chars)"
    return text  # not reached: the whole text did not fit


_CUT_MARK_BYTES = 24  # "...(+1048576 chars)" and then some
