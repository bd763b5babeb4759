"""The crash note: what the server writes for a handler that raised is what `try` and `test`
find again, in warnings and in a reject reason, and nothing else is taken for one."""

from __future__ import annotations

from bridge.reply_review.handler_crash import crash_note, crashes


def test_a_note_is_found_in_warnings_and_in_the_reject_reason() -> None:
    note = crash_note("limits", KeyError("cpu"))
    assert note == "limits: internal error (KeyError: 'cpu')"
    assert crashes({"warnings": ["other; " + note]}) == ["handler limits raised KeyError: 'cpu'"]
    assert crashes({"reject": {"reason": note}}) == ["handler limits raised KeyError: 'cpu'"]


def test_a_policy_decision_is_not_a_crash() -> None:
    assert crashes({"warnings": ["limits: memory raised to 1Gi"]}) == []
    assert crashes({"reject": {"reason": "limits: internal error without a type"}}) == []
    assert crashes({"reject": "limits: internal error (KeyError: 'cpu')"}) == []  # not a dict
    assert crashes({}) == []
