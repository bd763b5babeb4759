"""The node-effect executor: every effect kind of the SDK's registry, carried out on the host.

Owns ``NodeExecutor``: the executor table (one ``KindExecutor`` per kind of
``policy_server.sdk.effects.EFFECTS``, checked complete when built), ``apply`` (a decision's
effects at the event, in mode ``on``, ``dry-run`` or ``off``), ``notes`` (the reply's warnings
for effects not applied), ``keep`` and ``prune_resctrl``
(the reconciler's pass) and the start-up probe of the parts it writes. What each kind does is
its executor's: pod cgroup files ``cgroup_writer``, host directories ``host_directories``,
resctrl groups ``resctrl_groups``. Knows no policy: which resctrl groups are whose comes with
the ``NodePlan`` (``resctrl_prefixes``).

Must not: raise out of ``apply`` (every failure is logged and reported), or switch on effect
types (the table does).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from policy_server.node.cgroup_layout import DEFAULT_CGROUP_ROOT, CgroupVersion
from policy_server.node.cgroup_writer import CgroupWriter
from policy_server.node.cpu_weight import CpuWeights
from policy_server.node.execution import (
    NO_DRIFT,
    ApplyRun,
    Drift,
    ExecutionReport,
    ExecutorMode,
    KindExecutor,
    ProbeResult,
)
from policy_server.node.host_directories import make_directory
from policy_server.node.pod_confinement import PodHierarchy
from policy_server.node.resctrl_fs import ResctrlFS
from policy_server.node.resctrl_groups import ResctrlGroups
from policy_server.node.unit_properties import SystemdUnits
from policy_server.sdk.effects import (
    EFFECTS,
    CgroupWrite,
    Effect,
    HostDirectory,
    ResctrlGroup,
    ResctrlGroupRemoval,
)


class NodeExecutor:
    """Applies ``Effect``s according to ``mode`` (settable: the probe reads it again)."""

    def __init__(
        self,
        mode: ExecutorMode = ExecutorMode.OFF,
        root: Path = DEFAULT_CGROUP_ROOT,
        version: CgroupVersion = CgroupVersion.AUTO,
        resctrl: ResctrlFS | None = None,
        weights: CpuWeights | None = None,
        units: SystemdUnits | None = None,
        pods: PodHierarchy | None = None,
    ) -> None:
        self.mode = mode
        self.writer = CgroupWriter(
            root,
            version,
            weights if weights is not None else CpuWeights(),
            units if units is not None else SystemdUnits(),
            pods,
        )
        self.resctrl_groups = ResctrlGroups(resctrl if resctrl is not None else ResctrlFS())
        self.kinds: dict[type, KindExecutor[Any]] = {
            CgroupWrite: KindExecutor(
                self.writer.apply, keep=self.writer.keep, prepare=self.writer.prepare
            ),
            HostDirectory: KindExecutor(make_directory),
            ResctrlGroup: KindExecutor(self.resctrl_groups.ensure, keep=self.resctrl_groups.keep),
            ResctrlGroupRemoval: KindExecutor(self.resctrl_groups.remove),
        }
        if set(self.kinds) != EFFECTS.types():
            raise TypeError("the executor table and the SDK's effect registry disagree")

    # The parts the probe and the reconciler look at.
    @property
    def root(self) -> Path:
        return self.writer.root

    @property
    def version(self) -> CgroupVersion:
        return self.writer.version

    @property
    def pods(self) -> PodHierarchy:
        """Where node writes may go (``pod_confinement``)."""
        return self.writer.pods

    def known_version(self) -> CgroupVersion | None:
        return self.writer.known_version()

    @property
    def weights(self) -> CpuWeights:
        return self.writer.weights

    @property
    def units(self) -> SystemdUnits:
        return self.writer.units

    @property
    def resctrl(self) -> ResctrlFS:
        return self.resctrl_groups.fs

    @property
    def cgroups(self) -> ProbeResult:
        """Whether pod cgroups can be written (as probed)."""
        return self.writer.state

    @property
    def resctrl_state(self) -> ProbeResult:
        """Whether resctrl groups can be made (as probed)."""
        return self.resctrl_groups.state

    def probe(self) -> ProbeResult:
        """Check once whether the cgroup tree under ``root`` (and resctrl) can be written."""
        self.resctrl_groups.probe()
        return self.writer.probe(self.mode)

    def apply(self, effects: Sequence[Effect], context: str = "") -> ExecutionReport:
        """Carry out ``effects`` in order (each kind prepared once, before any of them)."""
        run = ApplyRun(self.mode, context)
        by_type: dict[type, list[Effect]] = {}
        for effect in effects:
            by_type.setdefault(type(effect), []).append(effect)
        for kind, of_kind in by_type.items():
            prepare = self.kinds[kind].prepare
            if prepare is not None:
                prepare(of_kind, run)
        for effect in effects:
            self.kinds[type(effect)].apply(effect, run)
        return run.report

    def notes(self, effects: Sequence[Effect], dry_run: bool = False) -> list[str]:
        """The reply's warnings for the effects this executor does not apply: all of them for a
        dry-run request or outside mode ``on`` (``EFFECTS.notes``), none otherwise."""
        if dry_run:
            why = "dry_run request"
        elif self.mode is ExecutorMode.ON:
            return []
        else:
            why = "executor off" if self.mode is ExecutorMode.OFF else "executor in dry-run mode"
        return EFFECTS.notes(effects, why)

    def keep(self, effect: Effect, level: str) -> Drift:
        """The reconciler's pass over one effect (kinds done once are left alone)."""
        keep = self.kinds[type(effect)].keep
        return NO_DRIFT if keep is None else keep(effect, level)

    def prune_resctrl(self, prefixes: Sequence[str], wanted: Collection[str]) -> Drift:
        """Remove the resctrl groups named with ``prefixes`` that are not ``wanted``."""
        return self.resctrl_groups.prune(prefixes, wanted)
