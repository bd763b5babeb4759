"""Linux CPU lists for policies: the bridge contract's one grammar
(bridge.contract.cpu_list_grammar).

Shared by every policy that handles cpusets (koordinator-qos, cpu-pools). `check_cpu_list`
takes text from a config value, an annotation or a /sys file: it strips the ends (a trailing
newline) and returns what it checked; inside a list no whitespace is allowed (the grammar's
rule, docs/policy-server.md). Pure; must not read ``/sys`` or know about policies.
"""

from __future__ import annotations

from bridge.contract.cpu_list_grammar import (
    MAX_CPU_ID,
    CpuListError,
    canonical_cpu_list,
    format_cpu_list,
    parse_cpu_list,
)
from bridge.contract.cpu_list_grammar import check_cpu_list_syntax as _check

__all__ = [
    "MAX_CPU_ID",
    "CpuListError",
    "canonical_cpu_list",
    "check_cpu_list",
    "format_cpu_list",
    "parse_cpu_list",
]


def check_cpu_list(text: str) -> str:
    """``text`` without surrounding whitespace if that is a CPU list, else ``ValueError``."""
    text = text.strip()
    if not text:
        raise ValueError("empty cpu list")
    _check(text)
    return text
