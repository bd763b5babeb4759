"""The one reply encoder: a merged, finished ``Decision`` -> the webhook contract's JSON.

Owns the reply body of a decision (its parts' JSON: ``policy_server.sdk.decision_json``) and the
bytes the server sends (``encode_reply``). The request path runs one way: the engine and the
server's settle step act on the ``Decision`` and collect their own warnings beside it
(``notes``); this module makes the wire shape once, at the end, and does not check it again (the
SDK's values are the contract's; the bridge checks every reply it reads). It is the one place
that fits what the framework joined to the contract's counts: the decision's warnings and the
notes after them cut to ``maxItems`` (the last kept one says how many more went), a joined
reject reason cut to ``maxLength`` (``limit_checks.fit_warnings`` / ``fit_reject``).
``check_reply`` is the contract check for tools that want one (the test kit): never called on
the hot path. Must not merge, edit a reply, or do I/O.
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import ValidationError

from bridge.contract import WebhookReply
from policy_server.exceptions import InvalidReplyError
from policy_server.sdk.decision import Decision
from policy_server.sdk.decision_json import adjustment_to_json, update_to_json
from policy_server.sdk.limit_checks import fit_reject, fit_warnings


def updates_to_json(decision: Decision) -> list[dict[str, Any]]:
    """The reply's ``update`` list (updates that change nothing are left out)."""
    return [update_to_json(u) for u in decision.update if not u.resources.is_empty()]


def decision_to_reply(decision: Decision, notes: tuple[str, ...] = ()) -> dict[str, Any]:
    """The reply body for a (merged) decision and the warnings added after it (``notes``);
    ``{}`` means no change.

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
        out["reject"] = {"reason": fit_reject(decision.reject)}
    warnings = reply_warnings(decision, notes)
    if warnings:
        out["warnings"] = list(warnings)
    return out


def reply_warnings(decision: Decision, notes: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The warnings a reply carries: the decision's, then ``notes``, fitted (module docstring)."""
    return fit_warnings((*decision.warnings, *notes) if notes else decision.warnings)


def encode_reply(decision: Decision, notes: tuple[str, ...] = ()) -> bytes:
    """The bytes the server sends for a finished decision."""
    return orjson.dumps(decision_to_reply(decision, notes))


def check_reply(body: bytes) -> None:
    """Check reply bytes against the contract's ``WebhookReply`` (the JSON check, as the bridge
    reads them); raises ``InvalidReplyError`` naming the fields outside it."""
    try:
        WebhookReply.model_validate_json(body)
    except ValidationError as exc:
        raise InvalidReplyError(exc.errors(), str(exc)) from None
