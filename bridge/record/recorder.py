"""Appends one JSON line per served event: the envelope a policy would receive
and the reply the bridge sent to the runtime.

Recording must never hurt serving: a write error (disk full, file removed) is
logged once, recording is suspended, and it resumes by itself on the next
successful write attempt after a back-off.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

log = logging.getLogger(__name__)

REDACTED = "<redacted>"
RETRY_AFTER_S = 30.0


@dataclass(frozen=True, slots=True)
class Redaction:
    annotations: bool = False
    env: bool = False

    def apply(self, envelope: dict[str, Any]) -> dict[str, Any]:
        if not (self.annotations or self.env):
            return envelope
        for key in ("pod", "container", "pods", "containers"):
            value = envelope.get(key)
            for obj in value if isinstance(value, list) else [value] if value else []:
                self._scrub(obj)
        return envelope

    def _scrub(self, obj: dict[str, Any]) -> None:
        if self.annotations and "annotations" in obj:
            obj["annotations"] = {k: REDACTED for k in obj["annotations"]}
        if self.env and "env" in obj:
            obj["env"] = [f"{item.partition('=')[0]}={REDACTED}" for item in obj["env"]]


class Recorder:
    def __init__(self, path: str, redaction: Redaction = Redaction()) -> None:
        self.path = Path(path)
        self.redaction = redaction
        self.written = 0
        self.dropped = 0
        self._file: IO[str] | None = None
        self._suspended_until = 0.0

    def write(self, envelope: dict[str, Any], reply: dict[str, Any], outcome: str,
              latency_ms: float) -> None:
        if time.monotonic() < self._suspended_until:
            self.dropped += 1
            return
        line = json.dumps({
            "event": envelope["event"], "outcome": outcome,
            "latency_ms": round(latency_ms, 3),
            "request": self.redaction.apply(envelope), "reply": reply,
        }, separators=(",", ":"))
        try:
            if self._file is None:
                self._file = self.path.open("a", encoding="utf-8")
            self._file.write(line + "\n")
            self._file.flush()
        except OSError as exc:
            self.dropped += 1
            self._suspended_until = time.monotonic() + RETRY_AFTER_S
            log.error("recording to %s failed, suspending for %.0fs: %s", self.path,
                      RETRY_AFTER_S, exc.strerror or exc)
            self._close_quietly()
            return
        self.written += 1

    def _close_quietly(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None

    def close(self) -> None:
        self._close_quietly()
