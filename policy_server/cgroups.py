"""The optional side-effect executor: pod-level writes NRI cannot carry.

koordlet writes some results straight into the pod cgroup at RunPodSandbox (spec §1.3): batch
sums, ``cpu.cfs_quota_us = -1`` for pinned pods, ``cpu.bvt_warp_ns``. Policies return them as
``CgroupWrite`` effects; this module applies them under a cgroup root, for cgroup v1
(``<root>/<controller>/<parent>/<file>``) or v2 (``<root>/<parent>/<v2 file>``, values
converted). Mode ``off`` (default) does nothing, ``dry-run`` only logs, ``on`` writes.

It never creates cgroups (a missing pod directory is skipped), never writes outside the root,
and never raises: every failure is logged and counted.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path, PurePosixPath

from policy_server.decision import CgroupWrite, Effect, HostDirectory

log = logging.getLogger(__name__)

DEFAULT_CGROUP_ROOT = Path("/sys/fs/cgroup")


class ExecutorMode(StrEnum):
    OFF = "off"
    DRY_RUN = "dry-run"
    ON = "on"


class CgroupVersion(StrEnum):
    AUTO = "auto"
    V1 = "1"
    V2 = "2"


def shares_to_weight(shares: int) -> int:
    """cgroup v1 ``cpu.shares`` -> v2 ``cpu.weight`` (kubelet's formula, shares in [2, 262144])."""
    shares = min(max(shares, 2), 262_144)
    return 1 + (shares - 2) * 9999 // 262142


def weight_to_shares(weight: int) -> int:
    """cgroup v2 ``cpu.weight`` -> v1 ``cpu.shares`` (kubelet's formula)."""
    return (weight - 1) * 262142 // 9999 + 2


# v1 file name -> (v1 controller directory, v2 file name)
_FILES: dict[str, tuple[str, str]] = {
    "cpu.shares": ("cpu", "cpu.weight"),
    "cpu.cfs_quota_us": ("cpu", "cpu.max"),
    "memory.limit_in_bytes": ("memory", "memory.max"),
    "cpu.bvt_warp_ns": ("cpu", "cpu.bvt_warp_ns"),
}


def _v2_value(file: str, value: int) -> str:
    if file == "cpu.shares":
        return str(shares_to_weight(value))
    if file in ("cpu.cfs_quota_us", "memory.limit_in_bytes"):
        # -1 (unlimited) is "max" in v2. Writing only $MAX to cpu.max leaves the period alone
        # (koordlet never sets the period).
        return "max" if value < 0 else str(value)
    return str(value)


def cgroup_dir(parent: str) -> PurePosixPath:
    """The pod's directory relative to a hierarchy root, for both cgroup drivers.

    cgroupfs: ``/kubepods/burstable/pod<uid>`` as is. systemd: ``kubepods-burstable-pod<uid>.slice``
    expands to ``kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice``.
    """
    parent = parent.strip()
    if not parent:
        raise ValueError("empty cgroup parent")
    if "/" not in parent and parent.endswith(".slice"):
        name = parent.removesuffix(".slice")
        parts = name.split("-")
        if not all(parts):
            raise ValueError(f"invalid systemd slice name {parent!r}")
        rel = PurePosixPath(*(("-".join(parts[: i + 1])) + ".slice" for i in range(len(parts))))
    else:
        rel = PurePosixPath(parent.lstrip("/"))
    if any(part in ("..", ".") for part in rel.parts) or not rel.parts:
        raise ValueError(f"invalid cgroup parent {parent!r}")
    return rel


@dataclass(slots=True)
class ExecutionReport:
    """What one ``apply`` call did."""

    written: list[str] = field(default_factory=list)
    logged: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


class CgroupExecutor:
    """Applies ``Effect``s according to ``mode``."""

    def __init__(
        self,
        mode: ExecutorMode = ExecutorMode.OFF,
        root: Path = DEFAULT_CGROUP_ROOT,
        version: CgroupVersion = CgroupVersion.AUTO,
    ) -> None:
        self.mode = mode
        self.root = root
        self._version = version

    @property
    def version(self) -> CgroupVersion:
        if self._version is not CgroupVersion.AUTO:
            return self._version
        unified = (self.root / "cgroup.controllers").exists()
        return CgroupVersion.V2 if unified else CgroupVersion.V1

    def target(self, write: CgroupWrite) -> tuple[Path, str]:
        """The file to write and the text to write into it (``ValueError`` if impossible)."""
        if write.file not in _FILES:
            raise ValueError(f"unsupported cgroup file {write.file!r}")
        controller, v2_file = _FILES[write.file]
        rel = cgroup_dir(write.cgroup_parent)
        if self.version is CgroupVersion.V2:
            return self.root / rel / v2_file, _v2_value(write.file, write.value)
        return self.root / controller / rel / write.file, str(write.value)

    def apply(self, effects: Iterable[Effect], context: str = "") -> ExecutionReport:
        report = ExecutionReport()
        if self.mode is ExecutorMode.OFF:
            return report
        for effect in effects:
            if isinstance(effect, CgroupWrite):
                self._write(effect, context, report)
            elif isinstance(effect, HostDirectory):
                self._mkdir(effect, context, report)
        return report

    def _write(self, write: CgroupWrite, context: str, report: ExecutionReport) -> None:
        try:
            path, text = self.target(write)
        except ValueError as exc:
            report.failed.append(f"{write.file} for {write.pod}: {exc}")
            log.error("pod cgroup write refused: %s pod=%s %s", exc, write.pod, context)
            return
        line = f"{path} <- {text}"
        if self.mode is ExecutorMode.DRY_RUN:
            report.logged.append(line)
            log.info("dry-run: would write %s pod=%s %s", line, write.pod, context)
            return
        if not path.parent.is_dir():
            report.skipped.append(line)
            log.warning(
                "pod cgroup %s does not exist; skipped %s pod=%s %s",
                path.parent,
                write.file,
                write.pod,
                context,
            )
            return
        try:
            # O_WRONLY without O_CREAT: cgroup files exist or the controller is not there.
            fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
            try:
                os.write(fd, text.encode())
            finally:
                os.close(fd)
        except OSError as exc:
            report.failed.append(f"{line}: {exc.strerror}")
            log.error(
                "pod cgroup write failed: %s: %s pod=%s %s", line, exc.strerror, write.pod, context
            )
            return
        report.written.append(line)
        log.info("wrote %s pod=%s %s", line, write.pod, context)

    def _mkdir(self, effect: HostDirectory, context: str, report: ExecutionReport) -> None:
        line = f"mkdir {effect.path} mode {effect.mode:o}"
        if not effect.path.startswith("/") or ".." in PurePosixPath(effect.path).parts:
            report.failed.append(f"{line}: not a clean absolute path")
            return
        if self.mode is ExecutorMode.DRY_RUN:
            report.logged.append(line)
            log.info("dry-run: would %s pod=%s %s", line, effect.pod, context)
            return
        try:
            os.makedirs(effect.path, exist_ok=True)
            os.chmod(effect.path, effect.mode)  # makedirs is subject to the umask
        except OSError as exc:
            report.failed.append(f"{line}: {exc.strerror}")
            log.error("%s failed: %s pod=%s %s", line, exc.strerror, effect.pod, context)
            return
        report.written.append(line)
