"""The resctrl filesystem: create, update, list and remove control groups.

Owns every read and write under the resctrl root (``/sys/fs/resctrl`` by default, configurable
so tests can use a fake tree): the probe (mounted, with L3 CAT), the node's cache geometry (the
root's ``info/L3/cbm_mask`` and the cache ids of the root ``schemata``), the CPU vendor (from
``/proc/cpuinfo``, for the MBA value), and the group directories (listed by name prefix).
Schemata arithmetic lives in ``resctrl_masks`` (pure).

Must not: take a name that is not one directory of the root, or one of the kernel's own
entries (``info``, ``mon_groups``, ``mon_data``), as a group; list a group no prefix asked for
names; or raise out of ``ensure``/``remove`` for an I/O error (they return what happened).
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from policy_server.node.resctrl_masks import schemata_lines
from policy_server.sdk.effects import ResctrlGroup

log = logging.getLogger(__name__)

DEFAULT_RESCTRL_ROOT = Path("/sys/fs/resctrl")
DEFAULT_CPUINFO = Path("/proc/cpuinfo")
# What the kernel keeps in the root beside the groups (Documentation/arch/x86/resctrl.rst).
_KERNEL_ENTRIES = frozenset({"info", "mon_groups", "mon_data"})


@dataclass(frozen=True, slots=True)
class Geometry:
    """What the schemata arithmetic needs from the node."""

    cbm: int
    cache_ids: tuple[int, ...]
    vendor: str


def _parse_schemata(text: str) -> dict[str, dict[int, str]]:
    """``L3:0=ff;1=ff`` lines -> ``{"L3": {0: "ff", 1: "ff"}}`` (values as written)."""
    out: dict[str, dict[int, str]] = {}
    for line in text.splitlines():
        name, sep, rest = line.strip().partition(":")
        if not sep:
            continue
        values: dict[int, str] = {}
        for item in rest.split(";"):
            cid, eq, value = item.strip().partition("=")
            if eq and cid.strip().isdigit():
                values[int(cid)] = value.strip()
        out[name.strip()] = values
    return out


def _same(resource: str, current: str | None, desired: str) -> bool:
    if current is None:
        return False
    base = 16 if resource.startswith("L3") else 10
    try:
        return int(current, base) == int(desired, base)
    except ValueError:
        return current == desired


class ResctrlFS:
    """One resctrl root."""

    def __init__(self, root: Path = DEFAULT_RESCTRL_ROOT, cpuinfo: Path = DEFAULT_CPUINFO) -> None:
        self.root = root
        self.cpuinfo = cpuinfo

    def probe(self) -> tuple[bool, str]:
        """(usable, why not): mounted with L3 cache allocation."""
        if not (self.root / "schemata").is_file():
            return False, f"no resctrl filesystem at {self.root} (no RDT hardware or not mounted)"
        if not (self.root / "info" / "L3" / "cbm_mask").is_file():
            return False, f"{self.root} has no L3 cache allocation (info/L3/cbm_mask)"
        if not os.access(self.root, os.W_OK):
            return False, f"{self.root} is not writable"
        return True, ""

    def geometry(self) -> Geometry:
        """Raises ``OSError``/``ValueError`` if the tree is unreadable or malformed."""
        cbm = int((self.root / "info" / "L3" / "cbm_mask").read_text().strip(), 16)
        root = _parse_schemata((self.root / "schemata").read_text())
        cache_ids = tuple(sorted(root.get("L3", {}) or root.get("L3CODE", {})))
        if not cache_ids:
            raise ValueError(f"{self.root}/schemata has no L3 line")
        return Geometry(cbm, cache_ids, self._vendor())

    def _vendor(self) -> str:
        try:
            for line in self.cpuinfo.read_text().splitlines():
                key, _, value = line.partition(":")
                if key.strip() == "vendor_id":
                    return value.strip()
        except OSError:
            pass
        return "unknown"

    def groups(self, prefixes: Sequence[str]) -> list[str]:
        """The groups that exist now and whose name starts with one of ``prefixes``."""
        wanted = tuple(p for p in prefixes if p)
        if not wanted:
            return []
        try:
            return sorted(
                entry.name
                for entry in os.scandir(self.root)
                if entry.is_dir()
                and entry.name.startswith(wanted)
                and entry.name not in _KERNEL_ENTRIES
            )
        except OSError:
            return []

    def _path(self, name: str) -> Path:
        if not name or "/" in name or name in (".", "..") or name in _KERNEL_ENTRIES:
            raise ValueError(f"refusing resctrl group name {name!r}")
        return self.root / name

    def exists(self, name: str) -> bool:
        try:
            return self._path(name).is_dir()
        except ValueError:
            return False

    def ensure(self, group: ResctrlGroup) -> tuple[str, str]:
        """Create the group if needed and bring its schemata in line.

        Returns ``(result, detail)``: ``created``, ``updated``, ``unchanged`` or ``failed``.
        """
        try:
            path = self._path(group.name)
            geometry = self.geometry()
            lines = schemata_lines(group, geometry.cbm, geometry.cache_ids, geometry.vendor)
        except (OSError, ValueError) as exc:
            return "failed", str(exc)
        created = False
        try:
            if not path.is_dir():
                path.mkdir()
                created = True
            schemata = path / "schemata"
            current = _parse_schemata(schemata.read_text()) if schemata.exists() else {}
            changed = False
            for line in lines:
                resource = line.partition(":")[0]
                wanted = _parse_schemata(line)[resource]
                have = current.get(resource, {})
                if all(_same(resource, have.get(cid), v) for cid, v in wanted.items()):
                    continue
                # One line per write: the kernel parses a write as one schemata update.
                with schemata.open("w") as out:
                    out.write(line + "\n")
                changed = True
                log.info("resctrl %s: wrote %s", group.name, line)
        except OSError as exc:
            return "failed", f"{path}: {exc.strerror or exc}"
        if created:
            return "created", ";".join(lines)
        return ("updated" if changed else "unchanged"), ";".join(lines)

    def remove(self, name: str) -> tuple[str, str]:
        """Delete the group: ``removed``, ``absent`` or ``failed``."""
        try:
            path = self._path(name)
        except ValueError as exc:
            return "failed", str(exc)
        try:
            os.rmdir(path)
        except FileNotFoundError:
            return "absent", ""
        except OSError as exc:
            if exc.errno != errno.ENOTEMPTY:
                return "failed", f"{path}: {exc.strerror}"
            # A real resctrl group is removed by rmdir even though it lists files; only a plain
            # directory tree (a fake root in tests) says ENOTEMPTY.
            try:
                shutil.rmtree(path)
            except OSError as exc2:
                return "failed", f"{path}: {exc2.strerror}"
        log.info("resctrl group %s removed", name)
        return "removed", ""
