"""The policy server's configuration (everything but where to listen) and its defaults.

Owns ``ServerOptions``, the value ``policy_server.main`` builds from the command line and
``service.composition.PolicyServer`` is built from. Must not build anything or do I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from policy_server.bridge_link.control_client import BridgeTrust
from policy_server.node.cgroup_layout import DEFAULT_CGROUP_ROOT, CgroupVersion
from policy_server.node.cpu_weight import WeightSetting
from policy_server.node.execution import ExecutorMode
from policy_server.node.pod_confinement import DEFAULT_KUBELET_CGROUP_ROOT
from policy_server.node.procfs import DEFAULT_PROC_ROOT
from policy_server.node.reconciler import DEFAULT_RECONCILE_INTERVAL_S
from policy_server.node.resctrl_fs import DEFAULT_RESCTRL_ROOT
from policy_server.node.unit_properties import DEFAULT_SYSTEM_BUS, PropertiesMode

# How often the server looks at pending resyncs and the reconciler's schedule, and how often
# policies' background tasks poll their configuration (--rules-poll-interval).
POLL_INTERVAL_S = 1.0
# The shipped systemd units and the DaemonSet start the policy server before the bridge, so for a
# while after start-up the bridge's control socket does not exist yet (or refuses connections).
# Within this many seconds of start-up that is the expected order (service.resync_schedule).
# `--bridge-start-wait` (docs/operations.md).
BRIDGE_START_WAIT_S = 60.0


@dataclass(frozen=True, slots=True)
class ServerOptions:
    """Everything configurable from the command line except where to listen."""

    # The default built-in's configuration (--rules, an alias: policies.enabled_builtins).
    rules_path: Path | None = None
    bridge_control: str | None = None
    # Who may answer on bridge_control (policy_server.bridge_link.control_client).
    bridge_trust: BridgeTrust = field(default_factory=BridgeTrust)
    # kubelet's --cgroup-root: node writes stay beneath its kubepods (node.pod_confinement).
    kubelet_cgroup_root: str = DEFAULT_KUBELET_CGROUP_ROOT
    policy_modules: tuple[str, ...] = ()
    # Serve the catalogue's DEFAULT_POLICY even if --policy does not name it (--no-koordinator).
    default_policies: bool = True
    # Built-in policies enabled by name (policy_server.policies), with their config files.
    builtin_policies: tuple[tuple[str, Path | None], ...] = ()
    executor_mode: ExecutorMode = ExecutorMode.OFF
    cgroup_root: Path = DEFAULT_CGROUP_ROOT
    cgroup_version: CgroupVersion = CgroupVersion.AUTO
    cpu_weight_formula: WeightSetting = WeightSetting.AUTO
    # Off unless asked for (the CLI's default is auto): a test's cgroup tree is no systemd's.
    systemd_properties: PropertiesMode = PropertiesMode.OFF
    system_bus: str = DEFAULT_SYSTEM_BUS
    rules_poll_interval_s: float = POLL_INTERVAL_S
    reconcile_interval_s: float = DEFAULT_RECONCILE_INTERVAL_S
    bridge_start_wait_s: float = BRIDGE_START_WAIT_S
    resctrl_root: Path = DEFAULT_RESCTRL_ROOT
    proc_root: Path = DEFAULT_PROC_ROOT
    # The node's sysfs, for its topology (node.topology); None: not read, the topology is not
    # known and nothing is checked against it (the CLI's default is /sys).
    sys_root: Path | None = None
