"""Log formats: one record is one line, whatever text a peer put into it."""

from __future__ import annotations

import io
import json
import logging

from bridge import logs


def _emit(fmt: str, msg: str, **extra: object) -> str:
    stream = io.StringIO()
    logs.setup("info", fmt, stream=stream)
    logging.getLogger("t").warning(msg, extra=extra)
    return stream.getvalue()


def test_text_format_cannot_be_forged_with_line_breaks() -> None:
    out = _emit("text", "reject: %s", reason="x\n2026-01-01 ERROR forged: pwned\r\x1b[31m")
    assert out.count("\n") == 1 and out.endswith("\n")
    assert "reason=x\\n2026-01-01 ERROR forged: pwned\\r\\x1b[31m" in out


def test_text_format_escapes_the_message_too() -> None:
    out = _emit("text", "policy said:\nERROR fake line")
    assert out.count("\n") == 1 and "policy said:\\nERROR fake line" in out


def test_json_format_is_one_object_per_line_with_extras() -> None:
    out = _emit("json", "event", event="CreateContainer", reason="a\nb")
    [line] = out.splitlines()
    record = json.loads(line)
    assert record["msg"] == "event" and record["event"] == "CreateContainer"
    assert record["reason"] == "a\nb" and record["level"] == "warning"
