"""The reply body for a merged decision (the webhook contract's JSON), and its check.

Owns the reply body of a merged decision (its parts' JSON: ``policy_server.sdk.decision_json``),
and the one check of a reply against the contract (``reply_body``:
encoded once, checked against ``WebhookReply``, remembered when it passed) that the hot route
and the test kit both use, so a reply the kit accepts is one the server sends. Must not merge
or do I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from pydantic import ValidationError

from bridge.contract import WebhookReply
from bridge.replies.checked import MAX_ENTRIES, CheckedReplies
from policy_server.exceptions import InvalidReplyError
from policy_server.sdk.decision import Decision
from policy_server.sdk.decision_json import adjustment_to_json, update_to_json


def updates_to_json(decision: Decision) -> list[dict[str, Any]]:
    """The reply's ``update`` list (updates that change nothing are left out)."""
    return [update_to_json(u) for u in decision.update if not u.resources.is_empty()]


def decision_to_reply(decision: Decision) -> dict[str, Any]:
    """The reply body for a (merged) decision; ``{}`` means no change.

    ``errors``, ``effects`` and ``push`` are not part of the reply: the engine has already turned
    errors into warnings or a rejection, effects belong to the executor and pushes to the server.
    """
    out: dict[str, Any] = {}
    if decision.adjust is not None and not decision.adjust.is_empty():
        out["adjust"] = adjustment_to_json(decision.adjust)
    updates = updates_to_json(decision)
    if updates:
        out["update"] = updates
    if decision.evict:
        out["evict"] = [
            {"container_id": e.container_id, "reason": e.reason}
            if e.reason
            else {"container_id": e.container_id}
            for e in decision.evict
        ]
    if decision.reject is not None:
        out["reject"] = {"reason": decision.reject}
    if decision.warnings:
        out["warnings"] = list(decision.warnings)
    return out


# Reply bodies already checked against WebhookReply (bridge.replies.checked): under load the
# check costs several times its micro-benchmark figure, its validator being cold
# (docs/performance.md#numbers-behind-the-code).
MAX_CHECKED = MAX_ENTRIES
_CHECKED: CheckedReplies[bytes, bool] = CheckedReplies(MAX_CHECKED)


def reply_body(reply: Mapping[str, Any]) -> bytes:
    """``reply`` as the bytes the server sends, checked against the contract's
    ``WebhookReply`` (the JSON check, as the bridge reads them); raises
    ``InvalidReplyError`` when it is outside the contract. A body that passed is remembered by
    its bytes; one that failed is checked again each time."""
    body = orjson.dumps(reply)
    if _CHECKED.get(body):
        return body
    try:
        WebhookReply.model_validate_json(body)
    except ValidationError as exc:
        raise InvalidReplyError(exc.errors(), str(exc)) from None
    _CHECKED.remember(body, body, True)
    return body
