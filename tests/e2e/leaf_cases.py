"""One reply per leaf of the NRI field table, and where each leaf shows in the runtime's OCI spec
(tests/e2e/test_field_differential.py).

A case names a leaf (bridge.contract.field_table.LEAVES), the webhook JSON that sets it (an
`adjust` fragment; a ContainerUpdate's `linux.resources` fragment for resource leaves), and two
probes that project the same value out of the runtime's OCI spec (`config.json`, `ctr containers
info`) and out of the simulator's container (the webhook JSON of an NRI `Container`), so the two
compare with `==`. `SKIPPED` are the leaves this host cannot show, each with its reason.

Owns: the values and the probes. Must not: predict (the simulator does) or touch a runtime.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bridge.contract.field_table import RESOURCES

Json = dict[str, Any]
Probe = Callable[[Json], Any]
MIB = 1024 * 1024
MARK = "e2e.diff"


def at(doc: Any, path: str) -> Any:
    """`doc["a"]["b"]...` for `a.b...`, None where any step is missing."""
    for key in path.split("."):
        if not isinstance(doc, dict) or key not in doc:
            return None
        doc = doc[key]
    return doc


def nested(path: str, value: Any) -> Json:
    out: Json = {}
    here = out
    *parents, last = path.split(".")
    for key in parents:
        here = here.setdefault(key, {})
    here[last] = value
    return out


@dataclass(frozen=True, slots=True)
class Case:
    leaf: str
    adjust: Json  # the `adjust` of a CreateContainer reply
    oci: Probe  # the value in the runtime's OCI spec
    nri: Probe  # the same value in the simulator's Container (webhook JSON)
    update: Json | None = None  # a ContainerUpdate's `linux.resources`, for update leaves


def _keyed(path: str, key: str, name: str, fields: tuple[str, ...]) -> Probe:
    """The entry of the list at `path` whose `key` is `name`, as a tuple of `fields`."""
    def probe(doc: Json) -> Any:
        for item in at(doc, path) or []:
            if item.get(key) == name:
                return tuple(item.get(f) for f in fields)
        return None
    return probe


def _env(name: str) -> Probe:
    def oci(doc: Json) -> Any:
        return next((e for e in at(doc, "process.env") or [] if e.startswith(name + "=")), None)
    return oci


def _nri_env(name: str) -> Probe:
    return lambda doc: next((e for e in doc.get("env") or [] if e.startswith(name + "=")), None)


def _hooks(kind_oci: str, kind_nri: str) -> tuple[Probe, Probe]:
    return (lambda d: [h.get("path") for h in at(d, f"hooks.{kind_oci}") or []],
            lambda d: [h.get("path") for h in at(d, f"hooks.{kind_nri}") or []])


def _types(path: str) -> Probe:
    return lambda d: sorted(n.get("type") for n in at(d, path) or [])


def _map_get(path: str, key: str) -> Probe:
    return lambda d: (at(d, path) or {}).get(key)


def _device_rule(path: str) -> Probe:
    def probe(doc: Json) -> Any:
        return any(r.get("type") == "c" and r.get("major") == 1 and r.get("minor") == 7
                   and not r.get("allow") for r in at(doc, path) or [])
    return probe


# The OCI spelling of a LinuxResources leaf that differs from NRI's.
_OCI_NAMES = {"kernel_tcp": "kernelTCP", "disable_oom_killer": "disableOOMKiller",
              "use_hierarchy": "useHierarchy", "realtime_runtime": "realtimeRuntime",
              "realtime_period": "realtimePeriod"}
# A value per resource leaf, each different from the test container's own (cpu shares 1024,
# cpuset 0-1, memory 256 MiB) and from the runtime defaults.
RESOURCE_VALUES: dict[str, Any] = {
    "memory.limit": 200 * MIB, "memory.reservation": 96 * MIB, "memory.swap": 300 * MIB,
    "memory.kernel": 64 * MIB, "memory.kernel_tcp": 32 * MIB, "memory.swappiness": 10,
    "memory.disable_oom_killer": True, "memory.use_hierarchy": True,
    "cpu.shares": 512, "cpu.quota": 50000, "cpu.period": 200000,
    "cpu.realtime_runtime": 0, "cpu.realtime_period": 1000000, "cpu.cpus": "0",
    "cpu.mems": "0", "pids": {"limit": 100}, "unified": {"memory.high": str(512 * MIB)},
}


def _resource_probes(name: str) -> tuple[Probe, Probe]:
    if name == "memory.limit":  # the swap a limit brings along is part of the leaf's effect
        return (lambda d: (at(d, "linux.resources.memory.limit"),
                           at(d, "linux.resources.memory.swap")),
                lambda d: (at(d, "linux.resources.memory.limit"),
                           at(d, "linux.resources.memory.swap")))
    if name == "pids":
        return (lambda d: at(d, "linux.resources.pids.limit"),
                lambda d: at(d, "linux.resources.pids.limit"))
    if name == "unified":
        return _map_get("linux.resources.unified", "memory.high"), _map_get(
            "linux.resources.unified", "memory.high")
    sub, leaf = name.split(".")
    oci_path = f"linux.resources.{sub}.{_OCI_NAMES.get(leaf, leaf)}"
    return (lambda d: at(d, oci_path), lambda d: at(d, f"linux.resources.{name}"))


def _resource_case(name: str) -> Case:
    value = RESOURCE_VALUES[name]
    oci, nri = _resource_probes(name)
    fragment = nested(name, value)
    return Case(RESOURCES + name, {"linux": {"resources": fragment}}, oci, nri,
                update=fragment)


_MOUNT = {"destination": "/e2e-diff", "type": "bind", "source": "/tmp",
          "options": ["rbind", "ro"]}
_POSTSTOP = _hooks("poststop", "poststop")
_DEVICE: Json = {"path": "/dev/e2e-diff-null", "type": "c", "major": 1, "minor": 3}
_ARGS = ["/bin/sh", "-c", "exec sleep 3601"]

CASES: tuple[Case, ...] = (
    Case("annotations", {"annotations": {f"{MARK}/annotation": "set"}},
         _map_get("annotations", f"{MARK}/annotation"),
         _map_get("annotations", f"{MARK}/annotation")),
    Case("mounts", {"mounts": [_MOUNT]},
         _keyed("mounts", "destination", "/e2e-diff", ("type", "source", "options")),
         _keyed("mounts", "destination", "/e2e-diff", ("type", "source", "options"))),
    Case("env", {"env": [{"key": "E2E_DIFF", "value": "env"}]},
         _env("E2E_DIFF"), _nri_env("E2E_DIFF")),
    Case("hooks", {"hooks": {"poststop": [{"path": "/bin/true"}]}}, *_POSTSTOP),
    Case("rlimits", {"rlimits": [{"type": "RLIMIT_NOFILE", "hard": 4096, "soft": 2048}]},
         _keyed("process.rlimits", "type", "RLIMIT_NOFILE", ("hard", "soft")),
         _keyed("rlimits", "type", "RLIMIT_NOFILE", ("hard", "soft"))),
    Case("args", {"args": _ARGS}, lambda d: at(d, "process.args"), lambda d: d.get("args")),
    Case("linux.devices", {"linux": {"devices": [_DEVICE]}},
         _keyed("linux.devices", "path", _DEVICE["path"], ("type", "major", "minor")),
         _keyed("linux.devices", "path", _DEVICE["path"], ("type", "major", "minor"))),
    Case("linux.namespaces", {"linux": {"namespaces": [{"type": "uts"}]}},
         _types("linux.namespaces"), _types("linux.namespaces")),
    Case("linux.sysctl", {"linux": {"sysctl": {"kernel.shm_rmid_forced": "1"}}},
         _map_get("linux.sysctl", "kernel.shm_rmid_forced"),
         _map_get("linux.sysctl", "kernel.shm_rmid_forced")),
    Case("linux.net_devices", {"linux": {"net_devices": {"e2ediff0": {"name": "e2ediff1"}}}},
         _map_get("linux.netDevices", "e2ediff0"), _map_get("linux.net_devices", "e2ediff0")),
    Case("linux.oom_score_adj", {"linux": {"oom_score_adj": 700}},
         lambda d: at(d, "process.oomScoreAdj"), lambda d: at(d, "linux.oom_score_adj")),
    Case("linux.io_priority",
         {"linux": {"io_priority": {"class": "IOPRIO_CLASS_BE", "priority": 4}}},
         lambda d: at(d, "process.ioPriority"), lambda d: at(d, "linux.io_priority")),
    Case("linux.seccomp_policy",
         {"linux": {"seccomp_policy": {"default_action": "SCMP_ACT_ALLOW"}}},
         lambda d: at(d, "linux.seccomp.defaultAction"),
         lambda d: at(d, "linux.seccomp_policy.default_action")),
    Case("linux.scheduler", {"linux": {"scheduler": {"policy": "SCHED_OTHER", "nice": 5}}},
         lambda d: at(d, "process.scheduler.nice"), lambda d: at(d, "linux.scheduler.nice")),
    Case("linux.rdt", {"linux": {"rdt": {"clos_id": "e2ediff"}}},
         lambda d: at(d, "linux.intelRdt.closID"), lambda d: at(d, "linux.rdt.clos_id")),
    Case("linux.memory_policy",
         {"linux": {"memory_policy": {"mode": "MPOL_PREFERRED", "nodes": "0"}}},
         lambda d: at(d, "linux.memoryPolicy.nodes"), lambda d: at(d, "linux.memory_policy.nodes")),
    *(_resource_case(name) for name in RESOURCE_VALUES),
    Case(RESOURCES + "devices",
         {"linux": {"resources": {"devices": [
             {"allow": False, "type": "c", "major": 1, "minor": 7, "access": "rwm"}]}}},
         _device_rule("linux.resources.devices"), _device_rule("linux.resources.devices"),
         update={"devices": [{"allow": False, "type": "c", "major": 1, "minor": 7,
                              "access": "rwm"}]}),
)

# Leaves this host cannot show, and why. Asserted: every leaf of the table is a case or here.
SKIPPED: dict[str, str] = {
    "CDI_devices": "needs a CDI spec on the node; with none, containerd 2.1.9 refuses the "
                   "container (unresolvable CDI device), so creation would test the spec, not "
                   "the table (containerd 1.7.24: NRI v0.6.1 has no CDI devices)",
    "linux.cgroups_path": "moves the container out of this run's cgroup tree (and needs the "
                          "driver's own syntax per node); kept out of the shared machine",
    RESOURCES + "hugepage_limits": "no hugepages are reserved on these hosts: containerd "
                                   "drops or runc refuses a hugetlb limit depending on the "
                                   "controller, a fact of the node, not of NRI",
    RESOURCES + "blockio_class": "no blockio class configuration on these hosts: containerd "
                                 "refuses any class (not a fact of the reply)",
    RESOURCES + "rdt_class": "no resctrl on these hosts: containerd refuses any RDT class",
}
