"""Pod-level cgroup writes (``CgroupWrite``): written, read back and kept.

koordlet writes some results straight into the pod cgroup at RunPodSandbox
(docs/koordinator.md#node-effects): batch sums, ``cpu.cfs_quota_us = -1`` for pinned pods,
``cpu.bvt_warp_ns``. Owns writing them under a cgroup root, for cgroup v1
(``<root>/<controller>/<parent>/<file>``) or v2 (``<root>/<parent>/<v2 file>``, values
converted: ``cgroup_layout``), with the systemd unit properties of the pod slices set first
(``unit_properties``), reading them back for the reconciler (``drifted``) and the probe of
whether they can be written at all (``cgroup_probe``); when they cannot, writes are skipped
without a word per event (the server says so once at start-up and in /v1/state).

Every path is confined (``pod_confinement``): the directory a write names must lie beneath the
pod hierarchy (kubepods below kubelet's cgroup root), and it is opened one component at a time
without following a symlink; a write that names anything else is refused with a warning naming
the pod and the path, and never reaches the disk.

Must not: create cgroups (a missing pod directory is skipped), write outside the pod hierarchy,
follow a symlink below the root, or raise: every failure is logged and reported.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from policy_server.node.cgroup_layout import (
    FILES,
    V1_UNLIMITED_MEMORY,
    CgroupVersion,
    cgroup_dir_text,
    v2_value,
)
from policy_server.node.cgroup_probe import PROBE_FILES_V1, PROBE_FILES_V2, unwritable
from policy_server.node.cpu_weight import CpuWeights
from policy_server.node.execution import ApplyRun, Drift, ExecutorMode, ProbeResult
from policy_server.node.pod_confinement import (
    ConfinementError,
    PodHierarchy,
    is_dir_beneath,
    read_beneath,
    write_beneath,
)
from policy_server.node.unit_properties import SystemdUnits, UnitProperty, properties_for, unit_name
from policy_server.sdk.effects import CgroupWrite

log = logging.getLogger(__name__)


def _cpu_period_us(base: str, names: tuple[str, ...]) -> int | None:
    """The period of the directory's ``cpu.max`` (``$MAX $PERIOD``), None if unreadable."""
    fields = (read_beneath(base, names, "cpu.max") or "").split()
    return int(fields[1]) if len(fields) == 2 and fields[1].isdigit() else None


class CgroupTarget:
    """One confined cgroup file: the trusted base (the root, or a v1 controller's hierarchy),
    the checked components below it, the file, and the text to write."""

    __slots__ = ("base", "file", "names", "text")

    def __init__(self, base: str, names: tuple[str, ...], file: str, text: str) -> None:
        self.base, self.names, self.file, self.text = base, names, file, text

    @property
    def path(self) -> str:
        return "/".join((self.base, *self.names, self.file))

    @property
    def directory(self) -> str:
        return "/".join((self.base, *self.names))


class CgroupWriter:
    """The cgroup tree under ``root``: see the module docstring."""

    def __init__(
        self,
        root: Path,
        version: CgroupVersion,
        weights: CpuWeights,
        units: SystemdUnits,
        pods: PodHierarchy | None = None,
    ) -> None:
        self.root = root
        self.pods = pods if pods is not None else PodHierarchy()
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
            target = self._target(write, self.version)
        except ValueError:
            return None
        text = read_beneath(target.base, target.names, target.file)
        if text is None:
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
            wanted = self._target(write, self.version).text
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
        """The file to write and the text to write into it (``ValueError`` if impossible,
        ``ConfinementError`` if the directory is outside the pod hierarchy)."""
        target = self._target(write, self.version)
        return Path(target.path), target.text

    def _target(self, write: CgroupWrite, version: CgroupVersion) -> CgroupTarget:
        # Strings, not Paths: a Synchronize writes several files of every pod, and building
        # Path objects was most of that time (docs/performance.md#numbers-behind-the-code).
        if write.file not in FILES:
            raise ValueError(f"unsupported cgroup file {write.file!r}")
        controller, v2_file = FILES[write.file]
        names = self.pods.confined(cgroup_dir_text(write.cgroup_parent), "cgroup parent")
        root = str(self.root).rstrip("/") or "/"
        if version is CgroupVersion.V2:
            text = v2_value(write.file, write.value, self.weights.for_writes)
            return CgroupTarget(root, names, v2_file, text)
        return CgroupTarget(f"{root}/{controller}", names, write.file, str(write.value))

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
                target = self._target(write, CgroupVersion.V2)
            except ValueError:
                continue  # refused with its reason by apply
            unit = unit_name(PurePosixPath(*target.names))
            if unit is None or not is_dir_beneath(target.base, target.names):
                continue
            v2_file, text = target.file, target.text
            period = _cpu_period_us(target.base, target.names) if v2_file == "cpu.max" else None
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
            target = self._target(write, run.cgroup_version)
        except ConfinementError as exc:
            report.failed.append(f"{write.file} for {write.pod}: refused: {exc}")
            log.warning("pod cgroup write refused: %s pod=%s %s", exc, write.pod, context)
            return
        except ValueError as exc:
            report.failed.append(f"{write.file} for {write.pod}: {exc}")
            log.error("pod cgroup write refused: %s pod=%s %s", exc, write.pod, context)
            return
        path, text = target.path, target.text
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
            # missing file is told apart only then (one walk per file on the common path).
            write_beneath(target.base, target.names, target.file, text)
        except FileNotFoundError as exc:
            if self._missing(write, target, line, exc, run):
                run.lacking.add(write.file)
            return
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                # A symlink (or a file) where a cgroup directory or file should be: not followed.
                report.failed.append(f"{line}: refused: a symlink or non-directory on the path")
                log.warning(
                    "pod cgroup write refused: %s is reached through a symlink or a "
                    "non-directory (not followed) pod=%s %s",
                    path,
                    write.pod,
                    context,
                )
                return
            report.failed.append(f"{line}: {exc.strerror}")
            log.error(
                "pod cgroup write failed: %s: %s pod=%s %s", line, exc.strerror, write.pod, context
            )
            return
        report.written.append(line)
        log.info("wrote %s pod=%s %s", line, write.pod, context)

    def _missing(
        self, write: CgroupWrite, target: CgroupTarget, line: str, exc: OSError, run: ApplyRun
    ) -> bool:
        """A file that could not be opened: its pod cgroup is gone, the kernel lacks it (True),
        or it is a failure."""
        directory = target.directory
        if not is_dir_beneath(target.base, target.names):
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
