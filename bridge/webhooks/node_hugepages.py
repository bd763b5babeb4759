"""The node's hugepages, read from sysfs: what a hugepage limit is bounded by.

`<sysfs_root>/kernel/mm/hugepages/hugepages-<size>kB/nr_hugepages` is the kernel's count of
persistent hugepages of each size (Documentation/admin-guide/mm/hugetlbpage.rst). The total of a
size, in bytes, bounds any hugepage limit a policy sets (bridge.webhooks.value_bounds); sizes are
named as the hugetlb controller's files and the runtime's limits name them (`2MB`, `1GB`).

Owns the `node:` section of the bridge config (`sysfs_root`, default `/sys`: also where the
node's CPUs and memory nodes are read, bridge.webhooks.node_cpusets) and the read. Must
not write anything, or fail an event: an unreadable directory means no hugepages (logged by the
caller's refusal, which names the total it saw).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bridge.errors import ConfigError
from bridge.webhooks.node_cpusets import NodeCpus, read_node_cpus

DEFAULT_SYSFS_ROOT = "/sys"
_DIR_RE = re.compile(r"^hugepages-([0-9]+)kB$")


@dataclass(frozen=True, slots=True)
class NodeSettings:
    """The `node:` section: where the node's sysfs is (a fake root in tests)."""

    sysfs_root: str = DEFAULT_SYSFS_ROOT

    @classmethod
    def parse(cls, section: Any, key: str = "node") -> NodeSettings:
        if section is None:
            return cls()
        if not isinstance(section, dict):
            raise ConfigError(key, "must be a mapping")
        unknown = sorted(set(section) - {"sysfs_root"})
        if unknown:
            raise ConfigError(f"{key}.{unknown[0]}", "unknown key (known: sysfs_root)")
        root = section.get("sysfs_root", DEFAULT_SYSFS_ROOT)
        if not isinstance(root, str) or not root.startswith("/"):
            raise ConfigError(f"{key}.sysfs_root", f"{root!r}: must be an absolute path")
        return cls(sysfs_root=root)

    def hugepages(self) -> dict[str, int]:
        return read_hugepages(self.sysfs_root)

    def node_cpus(self) -> NodeCpus:
        """The node's online CPUs and memory nodes (bridge.webhooks.node_cpusets)."""
        return read_node_cpus(self.sysfs_root)


def page_size_name(kib: int) -> str:
    """2048 -> "2MB", 1048576 -> "1GB", 64 -> "64KB"."""
    for unit, scale in (("GB", 1 << 20), ("MB", 1 << 10)):
        if kib >= scale and kib % scale == 0:
            return f"{kib // scale}{unit}"
    return f"{kib}KB"


def read_hugepages(sysfs_root: str) -> dict[str, int]:
    """Page size name -> bytes of persistent hugepages the node has; {} if none can be read."""
    base = Path(sysfs_root) / "kernel" / "mm" / "hugepages"
    out: dict[str, int] = {}
    try:
        entries = list(base.iterdir())
    except OSError:
        return out
    for entry in entries:
        match = _DIR_RE.match(entry.name)
        if match is None:
            continue
        try:
            pages = int((entry / "nr_hugepages").read_text().strip())
        except (OSError, ValueError):
            continue
        kib = int(match.group(1))
        out[page_size_name(kib)] = max(pages, 0) * kib * 1024
    return out
