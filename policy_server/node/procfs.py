"""``/proc`` writes of the node reconciler: processes' OOM scores and kernel switches.

Owns reading and writing ``/proc/<pid>/oom_score_adj`` and ``/proc/sys/kernel/<name>`` under a
configurable proc root (tests use a directory tree). Must not: create files (a switch the kernel
does not have is reported as absent, never created) or raise out of its methods.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_PROC_ROOT = Path("/proc")


class Procfs:
    """One proc root."""

    def __init__(self, root: Path = DEFAULT_PROC_ROOT) -> None:
        self.root = root

    def _write(self, path: Path, value: int) -> str | None:
        """Write without creating; returns an error text or None."""
        try:
            fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
            try:
                os.write(fd, f"{value}\n".encode())
            finally:
                os.close(fd)
        except OSError as exc:
            return f"{path}: {exc.strerror}"
        return None

    def _read_int(self, path: Path) -> int | None:
        try:
            return int(path.read_text().strip())
        except (OSError, ValueError):
            return None

    def oom_score_adj(self, pid: int) -> int | None:
        return self._read_int(self.root / str(pid) / "oom_score_adj")

    def set_oom_score_adj(self, pid: int, value: int) -> str | None:
        return self._write(self.root / str(pid) / "oom_score_adj", value)

    def kernel_switch(self, name: str) -> int | None:
        """``kernel.<name>``'s value, or None if this kernel has no such switch."""
        return self._read_int(self.root / "sys" / "kernel" / name)

    def set_kernel_switch(self, name: str, value: int) -> str | None:
        return self._write(self.root / "sys" / "kernel" / name, value)
