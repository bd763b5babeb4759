"""The node-effect executor: pod-level writes and host changes NRI cannot carry.

koordlet writes some results straight into the pod cgroup at RunPodSandbox
(docs/koordinator.md#node-effects): batch sums, ``cpu.cfs_quota_us = -1`` for pinned pods,
``cpu.bvt_warp_ns``. Policies return them as
``CgroupWrite`` effects; this module applies them under a cgroup root, for cgroup v1
(``<root>/<controller>/<parent>/<file>``) or v2 (``<root>/<parent>/<v2 file>``, values
converted), and reads them back for the reconciler (``drift``). It also (re)creates host
directories (HAMi-core) and hands resctrl groups to ``policy_server.node.resctrl_fs``. Mode ``on``
writes, ``dry-run`` only logs, ``off`` is the explicit "report only" choice.

``probe`` finds out once whether the cgroup files pod-level writes open can be written (the files,
not the hierarchy's read-only directory: see ``_unwritable``); when they cannot, cgroup writes
are skipped without a word per event (the server says so once at start-up and in /v1/state).
It never creates cgroups (a missing pod directory is skipped), never writes outside the root,
and never raises: every failure is logged and counted.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path, PurePosixPath

from policy_server.node.cgroup_files import KUBEPODS
from policy_server.node.cpu_weight import CpuWeights, WeightFormula, to_weight
from policy_server.node.resctrl_fs import ResctrlFS
from policy_server.node.unit_properties import SystemdUnits, UnitProperty, properties_for, unit_name
from policy_server.sdk.decision import (
    CgroupWrite,
    Effect,
    HostDirectory,
    ResctrlGroup,
    ResctrlGroupRemoval,
)

log = logging.getLogger(__name__)

DEFAULT_CGROUP_ROOT = Path("/sys/fs/cgroup")
# Pod cgroup directories remembered as text (a node's pods, with room for churn).
CGROUP_DIR_CACHE_SIZE = 16_384
# cgroup v1 reports "no memory limit" as a page-rounded huge number, not -1.
_V1_UNLIMITED_MEMORY = 1 << 62


class ExecutorMode(StrEnum):
    OFF = "off"
    DRY_RUN = "dry-run"
    ON = "on"


class CgroupVersion(StrEnum):
    AUTO = "auto"
    V1 = "1"
    V2 = "2"


# v1 file name -> (v1 controller directory, v2 file name)
_FILES: dict[str, tuple[str, str]] = {
    "cpu.shares": ("cpu", "cpu.weight"),
    "cpu.cfs_quota_us": ("cpu", "cpu.max"),
    "memory.limit_in_bytes": ("memory", "memory.max"),
    "cpu.bvt_warp_ns": ("cpu", "cpu.bvt_warp_ns"),
    "cpu.idle": ("cpu", "cpu.idle"),
}


def _v2_value(file: str, value: int, weights: WeightFormula) -> str:
    if file == "cpu.shares":
        # As the node's runtime converts the containers' shares (policy_server.node.cpu_weight).
        return str(to_weight(weights, value))
    if file in ("cpu.cfs_quota_us", "memory.limit_in_bytes"):
        # -1 (unlimited) is "max" in v2. Writing only $MAX to cpu.max leaves the period alone
        # (koordlet never sets the period).
        return "max" if value < 0 else str(value)
    return str(value)


# What the probe checks: the files pod-level writes really open (v1: per controller hierarchy),
# looked up where kubelet keeps pod cgroups first, then at the hierarchy's root.
_PROBE_FILES_V1: dict[str, tuple[str, ...]] = {
    "cpu": ("cpu.cfs_quota_us", "cpu.shares"),
    "memory": ("memory.limit_in_bytes",),
}
_PROBE_FILES_V2: tuple[str, ...] = ("cpu.max", "cpu.weight", "memory.max")


def _unwritable(hierarchy: Path, files: Sequence[str]) -> str:
    """Why pod cgroup files under ``hierarchy`` cannot be written ("" if they can).

    Not the hierarchy's directory: cgroupfs makes it 0555, and a pod-level write never creates
    anything there. What a write needs is the file itself (root-owned 0644 on cgroupfs, so UID 0
    with every capability dropped may write it as its owner) on a read-write mount.
    ``os.access`` checks with the caller's real UID and permitted capabilities, as the write will.
    """
    if not hierarchy.is_dir():
        return f"no cgroup hierarchy at {hierarchy}"
    try:
        if os.statvfs(hierarchy).f_flag & os.ST_RDONLY:
            return f"{hierarchy} is mounted read-only"
    except OSError as exc:
        return f"{hierarchy}: {exc.strerror}"
    places = [hierarchy / k for k in KUBEPODS if (hierarchy / k).is_dir()] + [hierarchy]
    for place in places:
        for name in files:
            sample = place / name
            if sample.is_file():
                if os.access(sample, os.W_OK):
                    return ""
                return (
                    f"{sample} is not writable by uid {os.getuid()} (pod cgroup files are "
                    "root-owned: run as UID 0)"
                )
    # No such file yet (e.g. cgroup v2 before kubelet made kubepods): the first write says why.
    return ""


def _cpu_period_us(directory: Path) -> int | None:
    """The period of ``directory``'s ``cpu.max`` (``$MAX $PERIOD``), None if unreadable."""
    fields = (_read_text(directory / "cpu.max") or "").split()
    return int(fields[1]) if len(fields) == 2 and fields[1].isdigit() else None


@functools.lru_cache(maxsize=CGROUP_DIR_CACHE_SIZE)
def _cgroup_dir_text(parent: str) -> str:
    """``cgroup_dir`` as text, remembered: each pod's parent is asked for at every write (text,
    not a path: a Synchronize asks for every pod's once, docs/performance.md)."""
    parent = parent.strip()
    if not parent:
        raise ValueError("empty cgroup parent")
    if "/" not in parent and parent.endswith(".slice"):
        parts = parent.removesuffix(".slice").split("-")
        if not all(parts):
            raise ValueError(f"invalid systemd slice name {parent!r}")
        return "/".join("-".join(parts[: i + 1]) + ".slice" for i in range(len(parts)))
    # As a path reads it: empty and "." components dropped, ".." refused.
    names = [name for name in parent.split("/") if name and name != "."]
    if not names or ".." in names:
        raise ValueError(f"invalid cgroup parent {parent!r}")
    return "/".join(names)


def cgroup_dir(parent: str) -> PurePosixPath:
    """The pod's directory relative to a hierarchy root, for both cgroup drivers.

    cgroupfs: ``/kubepods/burstable/pod<uid>`` as is. systemd: ``kubepods-burstable-pod<uid>.slice``
    expands to ``kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice``.
    Raises ``ValueError`` for an empty parent, a bad slice name or a ``..``.
    """
    return PurePosixPath(_cgroup_dir_text(parent))


@dataclass(slots=True)
class ExecutionReport:
    """What one ``apply`` call did."""

    written: list[str] = field(default_factory=list)
    logged: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    # Resctrl groups this call could not create (their rdt_class must not be handed out).
    missing_groups: list[str] = field(default_factory=list)
    # systemd unit properties set before the files were written ("<unit> CPUWeight=39").
    properties: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """Whether pod cgroups can be written here, and why not."""

    writable: bool
    reason: str = ""


class CgroupExecutor:
    """Applies ``Effect``s according to ``mode``."""

    def __init__(
        self,
        mode: ExecutorMode = ExecutorMode.OFF,
        root: Path = DEFAULT_CGROUP_ROOT,
        version: CgroupVersion = CgroupVersion.AUTO,
        resctrl: ResctrlFS | None = None,
        weights: CpuWeights | None = None,
        units: SystemdUnits | None = None,
    ) -> None:
        self.mode = mode
        self.root = root
        self._version = version
        self.resctrl = resctrl if resctrl is not None else ResctrlFS()
        self.weights = weights if weights is not None else CpuWeights()
        self.units = units if units is not None else SystemdUnits()
        # Until probed, assume usable: the first failed write says why.
        self.cgroups = ProbeResult(True)
        self.resctrl_state = ProbeResult(True)

    def probe(self) -> ProbeResult:
        """Check once whether the cgroup tree under ``root`` (and resctrl) can be written."""
        ok, why = self.resctrl.probe()
        self.resctrl_state = ProbeResult(ok, why)
        if self.mode is not ExecutorMode.ON:
            self.cgroups = ProbeResult(False, f"--pod-cgroup-writes {self.mode.value}")
            return self.cgroups
        if self.version is CgroupVersion.V2:
            hierarchies = [(self.root, _PROBE_FILES_V2)]
        else:
            hierarchies = [(self.root / c, files) for c, files in _PROBE_FILES_V1.items()]
        for hierarchy, files in hierarchies:
            why = _unwritable(hierarchy, files)
            if why:
                self.cgroups = ProbeResult(False, why)
                break
        else:
            self.cgroups = ProbeResult(True)
        if self.version is not CgroupVersion.V2:
            self.units.disable("cgroup v1 (the properties mirror cgroup v2 files)")
        elif self.cgroups.writable:
            self.units.probe()
        return self.cgroups

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
            return "-1" if int(text) >= _V1_UNLIMITED_MEMORY else text
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
        if any((self.root / c).is_dir() for c in _PROBE_FILES_V1):
            return CgroupVersion.V1
        return None

    def target(self, write: CgroupWrite) -> tuple[Path, str]:
        """The file to write and the text to write into it (``ValueError`` if impossible)."""
        path, text = self._target(write, self.version)
        return Path(path), text

    def _target(self, write: CgroupWrite, version: CgroupVersion) -> tuple[str, str]:
        # Strings, not Paths: a Synchronize writes several files of every pod, and building
        # Path objects was most of that time (docs/performance.md#numbers-behind-the-code).
        if write.file not in _FILES:
            raise ValueError(f"unsupported cgroup file {write.file!r}")
        controller, v2_file = _FILES[write.file]
        rel = _cgroup_dir_text(write.cgroup_parent)
        root = str(self.root).rstrip("/")
        if version is CgroupVersion.V2:
            return f"{root}/{rel}/{v2_file}", _v2_value(
                write.file, write.value, self.weights.for_writes
            )
        return f"{root}/{controller}/{rel}/{write.file}", str(write.value)

    def apply(self, effects: Sequence[Effect], context: str = "") -> ExecutionReport:
        report = ExecutionReport()
        if self.mode is ExecutorMode.OFF:
            report.missing_groups = [e.name for e in effects if isinstance(e, ResctrlGroup)]
            return report
        if self.mode is ExecutorMode.ON and self.cgroups.writable and self.units.active:
            self._set_unit_properties(effects, context, report)
        version = self.version  # looked at once per call, not per file
        # Files this call found the kernel without (cpu.bvt_warp_ns on a stock kernel): not
        # opened again for the other pods of a Synchronize or a reconciler pass.
        lacking: set[str] = set()
        for effect in effects:
            if isinstance(effect, CgroupWrite):
                if self.mode is ExecutorMode.ON and not self.cgroups.writable:
                    report.skipped.append(f"{effect.file} for {effect.pod}: cgroups not writable")
                    continue
                self._write(effect, version, context, report, lacking)
            elif isinstance(effect, HostDirectory):
                self._mkdir(effect, context, report)
            elif isinstance(effect, ResctrlGroup):
                self._resctrl(effect, context, report)
            elif isinstance(effect, ResctrlGroupRemoval):
                self._resctrl_remove(effect, context, report)
        return report

    def _set_unit_properties(
        self, effects: Sequence[Effect], context: str, report: ExecutionReport
    ) -> None:
        """Before the files: the properties of each systemd unit the writes go to, one call per
        unit, as runc's systemd manager does (unit_properties). The files are written anyway."""
        if self.version is not CgroupVersion.V2:
            return
        by_unit: dict[str, list[UnitProperty]] = {}
        for write in effects:
            if not isinstance(write, CgroupWrite) or write.file not in _FILES:
                continue
            try:
                rel = cgroup_dir(write.cgroup_parent)
            except ValueError:
                continue  # refused with its reason by _write
            unit = unit_name(rel)
            if unit is None or not (self.root / rel).is_dir():
                continue
            v2_file = _FILES[write.file][1]
            text = _v2_value(write.file, write.value, self.weights.for_writes)
            period = _cpu_period_us(self.root / rel) if v2_file == "cpu.max" else None
            by_unit.setdefault(unit, []).extend(properties_for(v2_file, text, period))
        for unit, properties in by_unit.items():
            if properties and self.units.set(unit, properties, context):
                report.properties.extend(f"{unit} {p}" for p in properties)

    def _resctrl(self, group: ResctrlGroup, context: str, report: ExecutionReport) -> None:
        if self.mode is ExecutorMode.DRY_RUN:
            report.logged.append(f"resctrl group {group.name}")
            report.missing_groups.append(group.name)
            return
        if not self.resctrl_state.writable:
            # Said once at start-up; the caller drops the rdt_class that needs this group.
            report.missing_groups.append(group.name)
            return
        result, detail = self.resctrl.ensure(group)
        line = f"resctrl group {group.name} {result}: {detail}"
        if result == "failed":
            report.failed.append(line)
            report.missing_groups.append(group.name)
            log.error("%s pod=%s %s", line, group.pod, context)
        elif result != "unchanged":
            report.written.append(line)

    def _resctrl_remove(
        self, removal: ResctrlGroupRemoval, context: str, report: ExecutionReport
    ) -> None:
        if self.mode is ExecutorMode.DRY_RUN:
            report.logged.append(f"remove resctrl group {removal.name}")
            return
        result, detail = self.resctrl.remove(removal.name)
        if result == "failed":
            report.failed.append(f"remove resctrl group {removal.name}: {detail}")
            log.error("remove resctrl group %s: %s %s", removal.name, detail, context)
        elif result == "removed":
            report.written.append(f"resctrl group {removal.name} removed")

    def _write(
        self,
        write: CgroupWrite,
        version: CgroupVersion,
        context: str,
        report: ExecutionReport,
        lacking: set[str],
    ) -> None:
        try:
            path, text = self._target(write, version)
        except ValueError as exc:
            report.failed.append(f"{write.file} for {write.pod}: {exc}")
            log.error("pod cgroup write refused: %s pod=%s %s", exc, write.pod, context)
            return
        line = f"{path} <- {text}"
        if self.mode is ExecutorMode.DRY_RUN:
            report.logged.append(line)
            log.info("dry-run: would write %s pod=%s %s", line, write.pod, context)
            return
        if write.file in lacking:
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
            if self._missing(write, path, line, exc, context, report):
                lacking.add(write.file)
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
        self,
        write: CgroupWrite,
        path: str,
        line: str,
        exc: OSError,
        context: str,
        report: ExecutionReport,
    ) -> bool:
        """A file that could not be opened: its pod cgroup is gone, the kernel lacks it (True),
        or it is a failure."""
        directory = os.path.dirname(path)
        if not os.path.isdir(directory):
            report.skipped.append(line)
            log.warning(
                "pod cgroup %s does not exist; skipped %s pod=%s %s",
                directory,
                write.file,
                write.pod,
                context,
            )
        elif write.file == "cpu.bvt_warp_ns":
            # Group identity is an Alibaba Cloud Linux / Anolis kernel feature; without it there
            # is nothing to write (reported once at start-up, not per pod).
            report.skipped.append(f"{line}: kernel has no {write.file}")
            return True
        else:
            report.failed.append(f"{line}: {exc.strerror}")
            log.error(
                "pod cgroup write failed: %s: %s pod=%s %s", line, exc.strerror, write.pod, context
            )
        return False

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
            # koordlet empties the directory first: a new container never sees a previous one's
            # cache file (docs/koordinator.md#gpuenvinject).
            if os.path.isdir(effect.path) and not os.path.islink(effect.path):
                shutil.rmtree(effect.path)
            os.makedirs(effect.path, exist_ok=True)
            os.chmod(effect.path, effect.mode)  # makedirs is subject to the umask
        except OSError as exc:
            report.failed.append(f"{line}: {exc.strerror}")
            log.error("%s failed: %s pod=%s %s", line, exc.strerror, effect.pod, context)
            return
        report.written.append(line)


def container_dir(cgroups_path: str) -> PurePosixPath:
    """A container's cgroup directory relative to a hierarchy root.

    cgroupfs: ``/kubepods/pod<uid>/<id>`` as is; systemd: ``<slice>:<prefix>:<id>`` is
    ``<slice path>/<prefix>-<id>.scope``.
    """
    parts = cgroups_path.split(":")
    if len(parts) == 3 and "/" not in cgroups_path:
        slice_name, prefix, cid = parts
        if not cid or not prefix:
            raise ValueError(f"invalid systemd cgroups path {cgroups_path!r}")
        return cgroup_dir(slice_name) / f"{prefix}-{cid}.scope"
    return cgroup_dir(cgroups_path)


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


class ContainerFiles:
    """Reads a container's CPU/memory values and its processes (for the reconciler)."""

    def __init__(self, executor: CgroupExecutor) -> None:
        self.root = executor.root
        self.v2 = executor.version is CgroupVersion.V2

    def _dir(self, controller: str, rel: PurePosixPath) -> Path:
        return self.root / rel if self.v2 else self.root / controller / rel

    def values(self, cgroups_path: str) -> dict[str, int | str] | None:
        """``shares``, ``quota`` (-1 = none), ``cpus``, ``memory`` (-1 = none) as read now."""
        try:
            rel = container_dir(cgroups_path)
        except ValueError:
            return None
        out: dict[str, int | str] = {}
        if self.v2:
            weight, cpu_max = (
                _read_text(self._dir("cpu", rel) / f) for f in ("cpu.weight", "cpu.max")
            )
            if weight is not None and weight.isdigit():
                out["weight"] = int(weight)
            if cpu_max:
                first = cpu_max.split()[0]
                if first == "max" or first.isdigit():
                    out["quota"] = -1 if first == "max" else int(first)
            memory = _read_text(self._dir("memory", rel) / "memory.max")
            if memory and (memory == "max" or memory.isdigit()):
                out["memory"] = -1 if memory == "max" else int(memory)
            cpus = _read_text(self._dir("cpuset", rel) / "cpuset.cpus")
        else:
            shares = _read_text(self._dir("cpu", rel) / "cpu.shares")
            quota = _read_text(self._dir("cpu", rel) / "cpu.cfs_quota_us")
            memory = _read_text(self._dir("memory", rel) / "memory.limit_in_bytes")
            cpus = _read_text(self._dir("cpuset", rel) / "cpuset.cpus")
            if shares is not None and shares.isdigit():
                out["shares"] = int(shares)
            if quota is not None and quota.lstrip("-").isdigit():
                out["quota"] = int(quota)
            if memory is not None and memory.isdigit():
                out["memory"] = -1 if int(memory) >= _V1_UNLIMITED_MEMORY else int(memory)
        if cpus:
            out["cpus"] = cpus
        return out or None

    def pids(self, cgroups_path: str) -> list[int]:
        """The processes in the container's cgroup (empty if it is gone)."""
        try:
            rel = container_dir(cgroups_path)
        except ValueError:
            return []
        text = _read_text(self._dir("cpu", rel) / "cgroup.procs")
        return [int(p) for p in text.split()] if text else []
