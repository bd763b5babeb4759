"""Linux CPU lists (``0-3,8,10-11``): the one grammar both products check, parse and write.

Owns: the grammar, the set it denotes and its canonical form. The policy SDK re-exports it
(policy_server.sdk.cpu_list); the bridge checks `cpu.cpus` / `cpu.mems` in replies with it
(bridge.webhooks.values). Must not: read /sys or cgroup files, or word errors for a product
(each side names the field it checked).

Grammar: ``list := element ("," element)*``, ``element := id | id "-" id``, ``id`` decimal,
``0 <= low <= high <= 65535``. This is what the kernel prints in cpuset.cpus and
/sys/devices/system/cpu/online and what Kubernetes and koordinator write.

Whitespace: none anywhere inside a list and no empty elements (``"0, 1"``, ``"0 - 3"``, ``"0,,1"``
are refused). A runtime writes the string into the cgroup file as given, and although the
kernel's parser skips blanks and repeated commas, other readers of the same value do not
(Kubernetes' cpuset parser, policies comparing lists as text), so only the form every reader
agrees on passes. Text read from a file or a config value may end in a newline: a reader
strips the ends before checking (the SDK's `check_cpu_list` does, and returns the stripped
text); a webhook reply is checked exactly as sent, since it reaches the runtime verbatim.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

MAX_CPU_ID = 65535
_MAX_ID_DIGITS = 10  # int() of a longer id would be out of range anyway (and may be slow)
_LIST_RE = re.compile(r"[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*")


class CpuListError(ValueError):
    """`text` is not a CPU list; `element` is the bad range, or None if the shape is wrong."""

    def __init__(self, text: str, element: str | None) -> None:
        self.text = text
        self.element = element
        what = "bad shape" if element is None else f"bad range {element[:64]!r}"
        super().__init__(f"invalid cpu list {text[:64]!r}: {what}")


def check_cpu_list_syntax(text: str) -> None:
    """Raise CpuListError unless `text` is a non-empty CPU list (whitespace is not allowed)."""
    if not _LIST_RE.fullmatch(text):
        raise CpuListError(text, None)
    for element in text.split(","):
        low, _, high = element.partition("-")
        if max(len(low), len(high)) > _MAX_ID_DIGITS or not (
                int(low) <= int(high or low) <= MAX_CPU_ID):
            raise CpuListError(text, element)


def parse_cpu_list(text: str) -> frozenset[int]:
    """The set of CPU ids in a CPU list; CpuListError if it is not one."""
    check_cpu_list_syntax(text)
    out: set[int] = set()
    for element in text.split(","):
        low, _, high = element.partition("-")
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
