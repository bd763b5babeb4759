"""Logging setup: human-readable text or one JSON object per line.

Structured context travels in `extra=` (event, uid, pod, container, webhook,
outcome, latency_ms, ...). Both formats print it; JSON puts each key at the
top level so log pipelines can index it.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, TextIO

_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message", "asctime", "taskName"}


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


def setup(level: str = "info", fmt: str = "text", stream: TextIO | None = None,
          path: str | None = None) -> None:
    handler: logging.Handler
    handler = logging.FileHandler(path) if path else logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # httpx logs every request at INFO; that is our per-event log's job.
    logging.getLogger("httpx").setLevel(logging.WARNING)
