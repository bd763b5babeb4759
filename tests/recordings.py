"""Test helpers for recorded wire logs and request payloads (not shipped in the products).

`load_wire_log` reads a `*-wire.jsonl` log line by line through the simulator's
`parse_line`; `rpc_sequence` is its (rpc, StateChange event) steps; `sync_payload` is the
Synchronize payload the bridge would send for those pods and containers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from bridge.contract.convert import to_json
from bridge.contract.request_body import Payload, encode
from bridge.proto.nri import api_pb2 as api
from bridge.simulator.recording import RecordingError, WireLine, parse_line


def load_wire_log(path: str | Path) -> list[WireLine]:
    lines = []
    text = Path(path).read_text(encoding="utf-8")
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RecordingError(f"{where}: invalid JSON: {exc}") from None
        if not isinstance(raw, dict):
            raise RecordingError(f"{where}: a line is a JSON object")
        lines.append(parse_line(raw, where))
    return lines


def rpc_sequence(lines: Sequence[WireLine], *,
                 skip: frozenset[str] = frozenset()) -> list[tuple[str, str]]:
    """The (rpc, StateChange event) steps of a log, leaving out the RPCs in `skip`."""
    return [line.step for line in lines if line.rpc not in skip]


def sync_payload(pods: Sequence[api.PodSandbox], containers: Sequence[api.Container]) -> Payload:
    return {"pods": encode([to_json(p) for p in pods]),
            "containers": encode([to_json(c) for c in containers])}
