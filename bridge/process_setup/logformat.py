"""The log line formats both programs write: text, or one JSON object per line.

Owns: the two `logging.Formatter`s and `handler()`, which builds the handler
for a `--log-format` value. `nri-webhook-bridge` and `nri-policy-server` both
use them, so a log pipeline parses their lines with one rule: the line shape is
a promise to operators, like the webhook JSON is to policy authors.

A JSON line is ``{"ts", "level", "logger", "msg", <extras>..., "exc"?}``: `ts` is
UTC with milliseconds (``2026-11-24T21:03:07.123Z``), `level` lower case, and
every `extra=` key of the record (event, pod, webhook, outcome, latency_ms, ...)
at the top level. Text lines escape line breaks and ESC in the message and the
extras, so text a peer sent (a policy's reason, a pod name) cannot forge lines.

Must not: configure loggers (callers own the root logger) or import anything
beyond the standard library.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, TextIO

LOG_FORMATS = ("text", "json")

_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message", "asctime", "taskName", "color_message"}  # uvicorn adds color_message


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        out.update(_extras(record))
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, separators=(",", ":"))


_CONTROL = str.maketrans({"\n": "\\n", "\r": "\\r", "\x1b": "\\x1b"})


def _one_line(text: str) -> str:
    """Text from a peer (a policy's reason, a pod name) cannot start a forged log line."""
    return text.translate(_CONTROL)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = _one_line(record.message)
        return super().formatMessage(record)

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)  # a traceback, if any, keeps its own line breaks
        extras = _extras(record)
        if extras:
            line += " " + " ".join(f"{k}={_one_line(str(v))}" for k, v in extras.items())
        return line


def formatter(fmt: str) -> logging.Formatter:
    """The formatter for a `--log-format` value (one of LOG_FORMATS)."""
    if fmt not in LOG_FORMATS:
        raise ValueError(f"unknown log format {fmt!r} (expected one of {', '.join(LOG_FORMATS)})")
    return JsonFormatter() if fmt == "json" else TextFormatter()


def handler(fmt: str, stream: TextIO | None = None, path: str | None = None) -> logging.Handler:
    """A handler writing `fmt` lines to `path` (appending) or `stream` (default stderr)."""
    out: logging.Handler = (logging.FileHandler(path) if path
                            else logging.StreamHandler(stream or sys.stderr))
    out.setFormatter(formatter(fmt))
    return out
