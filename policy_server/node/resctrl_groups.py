"""Resctrl groups as effects (``ResctrlGroup``, ``ResctrlGroupRemoval``): made, kept, removed.

Owns what the executor does with a group a decision asks for (created or brought in line with
its schemata; in ``off`` and ``dry-run`` mode, or where resctrl cannot be used, reported as
missing so its ``rdt_class`` is not handed out), a removal, the reconciler's keeping of the
groups, and the pruning of the groups a ``NodePlan`` owns by name prefix
(``NodePlan.resctrl_prefixes``) that no effect asks for. The filesystem is ``resctrl_fs``'s.
Must not: touch a group no effect or owned prefix names, or raise.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence

from policy_server.node.execution import ApplyRun, Drift, ExecutorMode, ProbeResult
from policy_server.node.resctrl_fs import ResctrlFS
from policy_server.sdk.effects import ResctrlGroup, ResctrlGroupRemoval

log = logging.getLogger(__name__)

LEVEL = "resctrl"


class ResctrlGroups:
    """The groups under one resctrl root; see the module docstring."""

    def __init__(self, fs: ResctrlFS) -> None:
        self.fs = fs
        # Until probed, assume usable: the first failed write says why.
        self.state = ProbeResult(True)

    def probe(self) -> ProbeResult:
        ok, why = self.fs.probe()
        self.state = ProbeResult(ok, why)
        return self.state

    def ensure(self, group: ResctrlGroup, run: ApplyRun) -> None:
        report = run.report
        if run.mode is ExecutorMode.OFF:
            report.missing_groups.append(group.name)
            return
        if run.mode is ExecutorMode.DRY_RUN:
            report.logged.append(f"resctrl group {group.name}")
            report.missing_groups.append(group.name)
            return
        if not self.state.writable:
            # Said once at start-up; the caller drops the rdt_class that needs this group.
            report.missing_groups.append(group.name)
            return
        result, detail = self.fs.ensure(group)
        line = f"resctrl group {group.name} {result}: {detail}"
        if result == "failed":
            report.failed.append(line)
            report.missing_groups.append(group.name)
            log.error("%s pod=%s %s", line, group.pod, run.context)
        elif result != "unchanged":
            report.written.append(line)

    def remove(self, removal: ResctrlGroupRemoval, run: ApplyRun) -> None:
        if run.mode is ExecutorMode.OFF:
            return
        if run.mode is ExecutorMode.DRY_RUN:
            run.report.logged.append(f"remove resctrl group {removal.name}")
            return
        result, detail = self.fs.remove(removal.name)
        if result == "failed":
            run.report.failed.append(f"remove resctrl group {removal.name}: {detail}")
            log.error("remove resctrl group %s: %s %s", removal.name, detail, run.context)
        elif result == "removed":
            run.report.written.append(f"resctrl group {removal.name} removed")

    def keep(self, group: ResctrlGroup, level: str) -> Drift:
        """The reconciler's pass (run in mode ``on`` only): create or fix the group (counted
        as ``resctrl`` drift)."""
        result, detail = self.fs.ensure(group)
        if result in ("created", "updated"):
            return Drift(LEVEL, 1, 1)
        if result == "failed":
            return Drift(LEVEL, errors=(f"resctrl group {group.name}: {detail}",))
        return Drift(LEVEL)

    def prune(self, prefixes: Sequence[str], wanted: Collection[str]) -> Drift:
        """The reconciler's pass (run in mode ``on`` only): remove the groups named with one of
        ``prefixes`` that are not ``wanted`` (the groups of pods that are gone)."""
        found, run = 0, ApplyRun(ExecutorMode.ON, "reconcile")
        for name in self.fs.groups(prefixes):
            if name in wanted:
                continue
            found += 1
            self.remove(ResctrlGroupRemoval(name), run)
        return Drift(LEVEL, found, len(run.report.written), tuple(run.report.failed))
