"""Recorded events and the comparison of a policy's replies with the recorded ones.

Shared by `nri-webhook-bridge replay` (bridge.record.replay_cli, which POSTs the events) and
the policy test kit (policy_server.testing, which runs the policy in-process), so both judge a
reply the same way.

Input is what `record` wrote (one JSON object per line with `request` and
`reply`). Each request is sent again with `dry_run: true`; the policy's reply
is compared with the recorded reply, or with the reply of the same `uid` in an
`--expected` file. Both sides are canonicalized through the same NRI
conversion the bridge applies (so `{"shares": 512}` written two ways compares
equal), keys that mean nothing for the event are dropped, and warnings are not
compared. Any difference or failed call makes the run fail: this is meant for
a policy's CI.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bridge.contract.adjustment import nri_adjustment_from_json, nri_adjustment_to_json
from bridge.contract.catalogue import REPLY_KEYS
from bridge.contract.convert import ConversionError, from_json, to_json
from bridge.errors import BridgeError
from bridge.proto.nri import api_pb2 as api


class ReplayInputError(BridgeError):
    """A recording or expectations file that cannot be used."""


@dataclass(frozen=True, slots=True)
class ReplayCase:
    where: str  # file:line, for messages
    request: dict[str, Any]
    expected: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ReplayOutcome:
    case: ReplayCase
    actual: dict[str, Any] | None
    error: str | None
    diff: str

    @property
    def ok(self) -> bool:
        return self.error is None and not self.diff


def read_records(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ReplayInputError(f"{path}: cannot read: {exc.strerror}") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise ReplayInputError(f"{where}: not JSON: {exc}") from None
        if not isinstance(record, dict) or not isinstance(record.get("request"), dict):
            raise ReplayInputError(f"{where}: expected an object with a 'request' object")
        yield where, record


def load_cases(recordings: Iterable[Path], expected: Path | None) -> list[ReplayCase]:
    overrides: dict[str, dict[str, Any]] = {}
    if expected is not None:
        for where, record in read_records(expected):
            uid = record["request"].get("uid")
            if not isinstance(uid, str):
                raise ReplayInputError(f"{where}: expected record has no request.uid")
            overrides[uid] = _reply_of(record, where)
    cases = []
    for path in recordings:
        for where, record in read_records(path):
            uid = record["request"].get("uid")
            reply = overrides.get(uid) if isinstance(uid, str) and uid in overrides else None
            cases.append(ReplayCase(where, record["request"],
                              reply if reply is not None else _reply_of(record, where)))
    return cases


def _reply_of(record: dict[str, Any], where: str) -> dict[str, Any]:
    reply = record.get("reply", {})
    if not isinstance(reply, dict):
        raise ReplayInputError(f"{where}: 'reply' must be an object")
    return reply


def canonical(event: str, reply: Any, where: str = "reply") -> dict[str, Any]:
    """The reply as the bridge would turn it into NRI and back; raises ConversionError."""
    if not isinstance(reply, dict):
        raise ConversionError(where, "expected an object")
    allowed = REPLY_KEYS.get(event, ())
    out: dict[str, Any] = {}
    if "adjust" in allowed and reply.get("adjust"):
        out["adjust"] = nri_adjustment_to_json(
            nri_adjustment_from_json(reply["adjust"], f"{where}.adjust"))
    for key, cls in (("update", api.ContainerUpdate), ("evict", api.ContainerEviction)):
        if key in allowed and reply.get(key):
            items = reply[key]
            if not isinstance(items, list):
                raise ConversionError(f"{where}.{key}", "expected a list")
            out[key] = [to_json(from_json(item, cls, f"{where}.{key}[{i}]"))
                        for i, item in enumerate(items)]
    if "reject" in allowed and reply.get("reject"):
        reject = reply["reject"]
        out["reject"] = {"reason": reject.get("reason", "") if isinstance(reject, dict) else ""}
    return out


def compare(case: ReplayCase, actual: Any) -> ReplayOutcome:
    event = str(case.request.get("event", ""))
    try:
        want = canonical(event, case.expected, "expected")
    except ConversionError as exc:
        return ReplayOutcome(case, None, f"recorded reply is invalid: {exc}", "")
    try:
        got = canonical(event, actual)
    except ConversionError as exc:
        return ReplayOutcome(case, None, f"policy reply is invalid: {exc}", "")
    if got == want:
        return ReplayOutcome(case, got, None, "")
    diff = "\n".join(difflib.unified_diff(
        _pretty(want).splitlines(), _pretty(got).splitlines(),
        fromfile="expected", tofile="policy", lineterm=""))
    return ReplayOutcome(case, got, None, diff)


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True)


def replay_body(request: dict[str, Any], budget_ms: int) -> bytes:
    body = dict(request, dry_run=True, budget_ms=budget_ms)
    return json.dumps(body, separators=(",", ":")).encode()
