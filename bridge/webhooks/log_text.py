"""Text from a policy's reply, bounded for a log line.

Owns: compact JSON for log values and the cut that keeps an escaped value within a byte budget.
Must not: decide what is logged (the webhook handler does), or encode requests
(bridge.contract.request_body does).
"""

from __future__ import annotations

import json
from typing import Any


def truncated_json(value: Any, limit: int) -> str:
    """Compact JSON for a log line, cut to `limit` bytes there (never a whole reply)."""
    return clip(json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str), limit)


def clip(text: str, limit: int) -> str:
    """`text` cut so that, escaped into a JSON log line, it takes at most `limit` bytes.

    Counted escaped because that is what a log line holds: `"` takes 2 bytes, a
    control character or a snowman 6, an emoji 12 (`\\ud83d\\ude00`).
    """
    if len(json.dumps(text)) - 2 <= limit:
        return text
    budget, size = limit - _CUT_MARK_BYTES, 0
    for i, char in enumerate(text):
        size += 1 if " " <= char <= "~" and char not in '"\\' else len(json.dumps(char)) - 2
        if size > budget:
            return f"{text[:i]}...(+{len(text) - i} chars)"
    return text  # not reached: the whole text did not fit


_CUT_MARK_BYTES = 24  # "...(+1048576 chars)" and then some
