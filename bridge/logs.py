"""Logging setup of the bridge: text or JSON lines (formats in bridge.process_setup.logformat).

Structured context travels in `extra=` (event, uid, pod, container, webhook,
outcome, latency_ms, ...). Both formats print it; JSON puts each key at the
top level so log pipelines can index it. The policy server writes the same
line shapes through the same formatters.
"""

from __future__ import annotations

import logging
from typing import TextIO

from bridge.process_setup.logformat import JsonFormatter, TextFormatter, handler

__all__ = ["JsonFormatter", "TextFormatter", "setup"]


def setup(level: str = "info", fmt: str = "text", stream: TextIO | None = None,
          path: str | None = None) -> None:
    root = logging.getLogger()
    root.handlers[:] = [handler(fmt, stream, path)]
    root.setLevel(level.upper())
    # httpx (the demo's and tools' HTTP client; webhook calls have their own) logs every
    # request at INFO; that is our per-event log's job.
    logging.getLogger("httpx").setLevel(logging.WARNING)
