"""Linux CPU list syntax (``0-3,8,10-11``): checked, parsed and written.

Shared by every policy that handles cpusets (koordinator-qos, cpu-pools). Pure; must not read
``/sys`` or know about policies.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
MAX_CPU_ID = 1 << 16


def check_cpu_list(text: str) -> str:
    """Return ``text`` stripped if it is a valid, non-empty CPU list, else raise ``ValueError``."""
    text = text.strip()
    if not text:
        raise ValueError("empty cpu list")
    for part in text.split(","):
        match = _RANGE.match(part.strip())
        if match is None:
            raise ValueError(f"invalid cpu list {text!r}: bad element {part!r}")
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) is not None else low
        if high < low or high >= MAX_CPU_ID:
            raise ValueError(f"invalid cpu list {text!r}: bad range {part!r}")
    return text


def parse_cpu_list(text: str) -> frozenset[int]:
    """The set of CPU ids in a valid list."""
    out: set[int] = set()
    for part in check_cpu_list(text).split(","):
        low, _, high = part.strip().partition("-")
        out.update(range(int(low), int(high or low) + 1))
    return frozenset(out)


def format_cpu_list(cpus: Iterable[int]) -> str:
    """The canonical list (ascending, runs as ranges) the kernel itself prints: ``0-2,5``."""
    ordered = sorted(set(cpus))
    parts: list[str] = []
    start = prev = -2
    for cpu in ordered:
        if cpu != prev + 1:
            if start >= 0:
                parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = cpu
        prev = cpu
    if start >= 0:
        parts.append(str(start) if start == prev else f"{start}-{prev}")
    return ",".join(parts)


@lru_cache(maxsize=256)  # a node has a handful of pool strings, asked for on every event
def canonical_cpu_list(text: str) -> str:
    """``0-7,8-15`` -> ``0-15``: what the kernel shows for the same set (valid lists only)."""
    return format_cpu_list(parse_cpu_list(text))
