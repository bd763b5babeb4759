"""Pod-level cgroup writes (``CgroupWrite``): written, read back and kept.

koordlet writes some results straight into the pod cgroup at RunPodSandbox
(docs/koordinator.md#node-effects): batch sums, ``cpu.cfs_quota_us = -1`` for pinned pods,
``cpu.bvt_warp_ns``. Owns writing them under a cgroup root, for cgroup v1
(``<root>/<controller>/<parent>/<file>``) or v2 (``<root>/<parent>/<v2 file>``, values
converted: ``cgroup_layout``), with the systemd unit properties of the pod slices set first
(``unit_properties``), reading them back for the reconciler (``drifted``) and the probe of
whether they can be written at all (``cgroup_probe``); when they cannot, writes are skipped
without a word per event (the server says so once at start-up and in /v1/state).

Must not: create cgroups (a missing pod directory is skipped), write outside the root, or
raise: every failure is logged and reported.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

from policy_server.node.cgroup_layout import (
    FILES,
    V1_UNLIMITED_MEMORY,
    CgroupVersion,
    cgroup_dir,
    cgroup_dir_text,
    read_text,
    v2_value,
)
from policy_server.node.cgroup_probe import PROBE_FILES_V1, PROBE_FILES_V2, unwritable
from policy_server.node.cpu_weight import CpuWeights
from policy_server.node.execution import ApplyRun, Drift, ExecutorMode, ProbeResult
from policy_server.node.unit_properties import SystemdUnits, UnitProperty, properties_for, unit_name
from policy_server.sdk.effects import CgroupWrite

log = logging.getLogger(__name__)


def _cpu_period_us(directory: Path) -> int | None:
    """The period of ``directory``'s ``cpu.max`` (``$MAX $PERIOD``), None if unreadable."""
    fields = (read_text(directory / "cpu.max") or "").split()
    return int(fields[1]) if len(fields) == 2 and fields[1].isdigit() else None


class CgroupWriter:
    """The cgroup tree under ``root``: see the module docstring."""

    def __init__(
        self, root: Path, version: CgroupVersion, weights: CpuWeights, units: SystemdUnits
    ) -> None:
        self.root = root
        self._version = version
        self.weights = weights
        self.units = units
        # Until probed, assume usable: the first failed write says why.
        self.state = ProbeResult(True)

    @property
    def version(self) -> CgroupVersion:
        if self._version is not CgroupVersion.AUTO:
            return self._version
        unified = (self.root / "cgroup.controllers").exists()
        return CgroupVersion.V2 if unified else CgroupVersion.V1

    def known_version(self) -> CgroupVersion | None:
        """The node's cgroup version if it is known: given, or seen under ``root`` (a v2
        ``cgroup.controllers``, or v1 controller hierarchies such as ``cpu``; hybrid nodes are
        v1, as runc sees them). None when ``root`` is not a cgroup tree at all."""
        if self._version is not CgroupVersion.AUTO:
            return self._version
        if (self.root / "cgroup.controllers").exists():
            return CgroupVersion.V2
        if any((self.root / c).is_dir() for c in PROBE_FILES_V1):
            return CgroupVersion.V1
        return None

    def probe(self, mode: ExecutorMode) -> ProbeResult:
        """Check once whether the cgroup tree under ``root`` can be written (and the units)."""
        if mode is not ExecutorMode.ON:
            self.state = ProbeResult(False, f"--pod-cgroup-writes {mode.value}")
            return self.state
        if self.version is CgroupVersion.V2:
            hierarchies = [(self.root, PROBE_FILES_V2)]
        else:
            hierarchies = [(self.root / c, files) for c, files in PROBE_FILES_V1.items()]
        for hierarchy, files in hierarchies:
            why = unwritable(hierarchy, files)
            if why:
                self.state = ProbeResult(False, why)
                break
        else:
            self.state = ProbeResult(True)
        if self.version is not CgroupVersion.V2:
            self.units.disable("cgroup v1 (the properties mirror cgroup v2 files)")
        elif self.state.writable:
            self.units.probe()
        return self.state

    # --- reading back ----------------------------------------------------------------------

    def read(self, write: CgroupWrite) -> str | None:
        """The file's current value in the form ``target`` writes, or None if unreadable."""
        try:
            path, _ = self.target(write)
            text = path.read_text().strip()
        except (OSError, ValueError):
            return None
        if self.version is CgroupVersion.V2:
            return text.split()[0] if write.file == "cpu.cfs_quota_us" and text else text
        if write.file == "memory.limit_in_bytes" and text.isdigit():
            return "-1" if int(text) >= V1_UNLIMITED_MEMORY else text
        return text

    def drifted(self, write: CgroupWrite) -> bool | None:
        """True if the file holds another value than ``write`` (None: cannot tell)."""
        if (
            write.file == "cpu.shares"
            and self.weights.formula is None
            and self.version is CgroupVersion.V2
        ):
            return None  # which weight is right depends on the runtime's formula, not known yet
        current = self.read(write)
        if current is None:
            return None
        try:
            _, wanted = self.target(write)
        except ValueError:
            return None
        return current != wanted

    def keep(self, write: CgroupWrite, level: str) -> Drift:
        """The reconciler's pass (run in mode ``on`` only): rewrite the file if it holds another
        value."""
        if not self.state.writable or not self.drifted(write):
            return Drift(level)
        run = ApplyRun(ExecutorMode.ON, "reconcile")
        self.prepare([write], run)
        self.apply(write, run)
        return Drift(level, 1, len(run.report.written), tuple(run.report.failed))

    # --- writing ---------------------------------------------------------------------------

    def target(self, write: CgroupWrite) -> tuple[Path, str]:
        """The file to write and the text to write into it (``ValueError`` if impossible)."""
        path, text = self._target(write, self.version)
        return Path(path), text

    def _target(self, write: CgroupWrite, version: CgroupVersion) -> tuple[str, str]:
        # Strings, not Paths: a Synchronize writes several files of every pod, and building
        # Path objects was most of that time (docs/performance.md#numbers-behind-the-code).
        if write.file not in FILES:
            raise ValueError(f"unsupported cgroup file {write.file!r}")
        controller, v2_file = FILES[write.file]
        rel = cgroup_dir_text(write.cgroup_parent)
        root = str(self.root).rstrip("/")
        if version is CgroupVersion.V2:
            return f"{root}/{rel}/{v2_file}", v2_value(
                write.file, write.value, self.weights.for_writes
            )
        return f"{root}/{controller}/{rel}/{write.file}", str(write.value)

    def prepare(self, writes: Sequence[CgroupWrite], run: ApplyRun) -> None:
        """Once per call, before the files: the version, and the systemd unit properties."""
        run.cgroup_version = self.version
        if run.mode is ExecutorMode.ON and self.state.writable and self.units.active:
            self._set_unit_properties(writes, run)

    def _set_unit_properties(self, writes: Sequence[CgroupWrite], run: ApplyRun) -> None:
        """The properties of each systemd unit the writes go to, one call per unit, as runc's
        systemd manager does (unit_properties). The files are written anyway."""
        if run.cgroup_version is not CgroupVersion.V2:
            return
        by_unit: dict[str, list[UnitProperty]] = {}
        for write in writes:
            if write.file not in FILES:
                continue
            try:
                rel = cgroup_dir(write.cgroup_parent)
            except ValueError:
                continue  # refused with its reason by apply
            unit = unit_name(rel)
            if unit is None or not (self.root / rel).is_dir():
                continue
            v2_file = FILES[write.file][1]
            text = v2_value(write.file, write.value, self.weights.for_writes)
            period = _cpu_period_us(self.root / rel) if v2_file == "cpu.max" else None
            by_unit.setdefault(unit, []).extend(properties_for(v2_file, text, period))
        for unit, properties in by_unit.items():
            if properties and self.units.set(unit, properties, run.context):
                run.report.properties.extend(f"{unit} {p}" for p in properties)

    def apply(self, write: CgroupWrite, run: ApplyRun) -> None:
        report, context = run.report, run.context
        if run.mode is ExecutorMode.OFF:
            return
        if run.mode is ExecutorMode.ON and not self.state.writable:
            report.skipped.append(f"{write.file} for {write.pod}: cgroups not writable")
            return
        try:
            path, text = self._target(write, run.cgroup_version)
        except ValueError as exc:
            report.failed.append(f"{write.file} for {write.pod}: {exc}")
            log.error("pod cgroup write refused: %s pod=%s %s", exc, write.pod, context)
            return
        line = f"{path} <- {text}"
        if run.mode is ExecutorMode.DRY_RUN:
            report.logged.append(line)
            log.info("dry-run: would write %s pod=%s %s", line, write.pod, context)
            return
        if write.file in run.lacking:
            report.skipped.append(f"{line}: kernel has no {write.file}")
            return
        try:
            # O_WRONLY without O_CREAT: cgroup files exist or the controller is not there. A
            # missing file is told apart only then (one open per file on the common path).
            fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
            try:
                os.write(fd, text.encode())
            finally:
                os.close(fd)
        except FileNotFoundError as exc:
            if self._missing(write, path, line, exc, run):
                run.lacking.add(write.file)
            return
        except OSError as exc:
            report.failed.append(f"{line}: {exc.strerror}")
            log.error(
                "pod cgroup write failed: %s: %s pod=%s %s", line, exc.strerror, write.pod, context
            )
            return
        report.written.append(line)
        log.info("wrote %s pod=%s %s", line, write.pod, context)

    def _missing(
        self, write: CgroupWrite, path: str, line: str, exc: OSError, run: ApplyRun
    ) -> bool:
        """A file that could not be opened: its pod cgroup is gone, the kernel lacks it (True),
        or it is a failure."""
        directory = os.path.dirname(path)
        if not os.path.isdir(directory):
            run.report.skipped.append(line)
            log.warning(
                "pod cgroup %s does not exist; skipped %s pod=%s %s",
                directory,
                write.file,
                write.pod,
                run.context,
            )
        elif write.file == "cpu.bvt_warp_ns":
            # Group identity is an Alibaba Cloud Linux / Anolis kernel feature; without it there
            # is nothing to write (reported once at start-up, not per pod).
            run.report.skipped.append(f"{line}: kernel has no {write.file}")
            return True
        else:
            run.report.failed.append(f"{line}: {exc.strerror}")
            log.error(
                "pod cgroup write failed: %s: %s pod=%s %s",
                line,
                exc.strerror,
                write.pod,
                run.context,
            )
        return False
