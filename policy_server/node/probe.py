"""What can take effect on this node: probed once at start-up, logged once, shown in /v1/state.

Owns the start-up probe of every node effect (pod cgroups, systemd unit properties on the pod
slices, resctrl, core scheduling, the group identity kernel feature, the reconciler) and its
JSON description, and the ``NodeFacts`` the policies get (the topology ``node.node_topology`` read;
the cgroup version: no ``unified``
keys on cgroup v1 containers; on v2 the files a container's cgroup has,
``NodeFacts.cgroup_files``: a key without its file stops the container). One warning line per
part that cannot work, at start-up only: events never repeat it.
"""

from __future__ import annotations

import logging
from typing import Any

from policy_server.node import coresched
from policy_server.node.cgroup_files import container_cgroup_files
from policy_server.node.cgroup_layout import CgroupVersion
from policy_server.node.execution import ExecutorMode
from policy_server.node.executor import NodeExecutor
from policy_server.node.procfs import Procfs
from policy_server.node.reconciler import NodeReconciler
from policy_server.sdk.node_facts import CgroupVersionFact, NodeFacts, NodeTopology
from policy_server.sdk.node_plan import BVT_FILE, SYSCTL_GROUP_IDENTITY, NodeNeeds

log = logging.getLogger(__name__)

_FACT_VERSIONS: dict[CgroupVersion | None, CgroupVersionFact] = {
    CgroupVersion.V1: 1,
    CgroupVersion.V2: 2,
    None: None,
}
UNIFIED_OFF_V1 = (
    'cgroup v1: runc refuses unified keys ("cannot use unified on cgroup v1"), so containers '
    "get no unified[cpu.bvt_warp_ns] whatever group_identity_kernel_support says; the value "
    "is written to pod cgroups only"
)


UNIFIED_OFF_NO_FILE = (
    f"the containers' cgroups have no {BVT_FILE} (a kernel without group identity: not Alibaba "
    f"Cloud Linux / Anolis), so containers get no unified[{BVT_FILE}] whatever "
    "group_identity_kernel_support says (runc would refuse to create every container)"
)
UNIFIED_OFF_UNKNOWN = (
    "which files the containers' cgroups have is not known (no readable kubepods cgroup under "
    f"{{root}}), so containers get no unified[{BVT_FILE}] whatever "
    "group_identity_kernel_support says (runc would refuse every container were it missing)"
)


def node_facts(executor: NodeExecutor, topology: NodeTopology | None = None) -> NodeFacts:
    """What the policies are told about this node (unknown parts stay None); ``topology``
    as ``policy_server.node.node_topology`` read it (not read: not known)."""
    version = executor.known_version()
    files = container_cgroup_files(executor.root) if version is CgroupVersion.V2 else None
    return NodeFacts(cgroup_version=_FACT_VERSIONS[version], cgroup_files=files,
                     topology=topology or NodeTopology())


def _container_unified_off(executor: NodeExecutor, facts: NodeFacts) -> str:
    """Why containers get no ``unified[cpu.bvt_warp_ns]`` here ("" if they may)."""
    if facts.has_cgroup_file(BVT_FILE):
        return ""
    if not facts.unified_allowed:
        return UNIFIED_OFF_V1
    if facts.cgroup_files is not None:
        return UNIFIED_OFF_NO_FILE
    return UNIFIED_OFF_UNKNOWN.format(root=executor.root)


def _group_identity(executor: NodeExecutor, procfs: Procfs) -> tuple[bool, str]:
    if procfs.kernel_switch(SYSCTL_GROUP_IDENTITY) is not None:
        return True, ""
    if (
        executor.version is CgroupVersion.V1
        and (executor.root / "cpu" / "cpu.bvt_warp_ns").exists()
    ):
        return True, ""
    return False, (
        "kernel without group identity (no cpu.bvt_warp_ns, no "
        f"kernel.{SYSCTL_GROUP_IDENTITY}: not an Alibaba Cloud Linux / Anolis kernel)"
    )


def probe_node(
    executor: NodeExecutor,
    reconciler: NodeReconciler | None,
    procfs: Procfs,
    reconcile_interval_s: float,
    needs: NodeNeeds,
    facts: NodeFacts,
) -> dict[str, Any]:
    """Probe every part; log one line per part that cannot take effect (a warning for what
    ``needs``, the policies' configurations in force, ask for)."""
    cgroups = executor.probe()
    state: dict[str, Any] = {
        "mode": executor.mode.value,
        "node": facts.to_json(),
        "cgroups": {
            "root": str(executor.root),
            "version": executor.version.value,
            "writable": cgroups.writable,
            "reason": cgroups.reason,
        },
    }
    units = executor.units.to_json()
    # kubelet's systemd driver made kubepods.slice: without the properties systemd resets values.
    units["systemd_driver"] = (executor.root / "kubepods.slice").is_dir()
    state["systemd_properties"] = units
    resctrl_ok, resctrl_why = executor.resctrl_state.writable, executor.resctrl_state.reason
    state["resctrl"] = {
        "root": str(executor.resctrl.root),
        "usable": resctrl_ok,
        "reason": resctrl_why,
    }
    gi_ok, gi_why = _group_identity(executor, procfs)
    container_off = _container_unified_off(executor, facts)
    state["group_identity"] = {
        "kernel": gi_ok,
        "reason": gi_why,
        # The NRI mapping onto containers (unified["cpu.bvt_warp_ns"]), rules permitting.
        "container_unified": not container_off,
        "container_unified_reason": container_off,
    }
    if reconciler is not None:
        reconciler.probe()
        core_ok, core_why = reconciler.core_sched
    else:
        core_ok, core_why = coresched.probe()  # said anyway: the cookies need the reconciler
    state["core_sched"] = {"supported": core_ok, "reason": core_why}
    if reconciler is None:
        why = "no --bridge-control (the reconciler lists pods through the bridge)"
        state["reconciler"] = {"running": False, "reason": why}
    elif reconcile_interval_s <= 0:
        state["reconciler"] = {"running": False, "reason": "--reconcile-interval 0"}
    else:
        state["reconciler"] = {"running": True, "interval_s": reconcile_interval_s, "reason": ""}
    _log_once(state, executor.mode, needs)
    return state


def _log_once(state: dict[str, Any], mode: ExecutorMode, needs: NodeNeeds) -> None:
    container_off = state["group_identity"]["container_unified_reason"]
    if container_off:
        # Said whatever the mode: it is about replies, not node effects. A warning when the
        # rules in force ask for the mapping (it is overridden), worth knowing otherwise.
        level = logging.WARNING if needs.container_group_identity else logging.INFO
        log.log(level, "group identity on containers is off: %s", container_off)
    if mode is ExecutorMode.OFF:
        log.warning("node effects are off (--pod-cgroup-writes off): report only")
        return
    if mode is ExecutorMode.DRY_RUN:
        log.warning("node effects in dry-run mode: every write is logged, none is done")
    if not state["cgroups"]["writable"]:
        log.warning(
            "pod cgroup writes cannot take effect: %s; pod-level values are not applied",
            state["cgroups"]["reason"],
        )
    units = state["systemd_properties"]
    if units["mode"] != "off" and units["state"] not in ("working", "unprobed"):
        # Worth a warning where kubelet uses systemd (its slices' values come back) or when
        # asked for explicitly; elsewhere (cgroupfs driver, v1) only worth knowing.
        wanted = units["systemd_driver"] or units["mode"] == "on"
        log.log(
            logging.WARNING if wanted else logging.INFO,
            "systemd unit properties are not set on pod slices: %s; the cgroup files are "
            "written directly (systemd may put its own values back until the reconciler's next "
            "pass)",
            units["reason"],
        )
    for part, key, what, wanted in (
        ("resctrl", "usable", "resctrl groups (Resctrl)", needs.resctrl),
        ("core_sched", "supported", "core scheduling (CoreSched)", needs.core_sched),
        ("group_identity", "kernel", "group identity (cpu.bvt_warp_ns)", needs.group_identity),
        ("reconciler", "running", "the reconciler", True),
    ):
        if not state[part][key]:
            # A warning for what the rules in force ask for; the rest is worth knowing only.
            level = logging.WARNING if wanted else logging.INFO
            log.log(level, "%s cannot take effect here: %s", what, state[part]["reason"])


def describe_node_state(
    state: dict[str, Any], executor: NodeExecutor, reconciler: NodeReconciler | None
) -> dict[str, Any]:
    """The probed state plus what was learned since (the runtime's cpu.weight formula) and the
    reconciler's last pass."""
    out = dict(state)
    if "cgroups" in out:
        out["cgroups"] = {**out["cgroups"], "cpu_weight": executor.weights.to_json()}
    last = reconciler.last if reconciler is not None else None
    if last is not None and "reconciler" in out:
        out["reconciler"] = {
            **out["reconciler"],
            "last_pass": {
                "finished": last.finished,
                "completed": last.error is None,
                "error": last.error,
                "drift_found": dict(last.found),
                "drift_fixed": dict(last.fixed),
                "errors": last.errors[:10],
                "skipped": last.skipped[:20],
                "skipped_count": len(last.skipped),
            },
        }
    return out
