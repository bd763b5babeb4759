"""Value checks the protobuf types cannot express: cpusets, ranges, names, paths.

`from_json` already guarantees types and integer widths; this module refuses
values the runtime would choke on or that smuggle something past the allow
list (e.g. a cgroup `unified` key with a path in it). Each check raises
`ValueProblem(path, problem)`; callers decide what a problem means.
"""

from __future__ import annotations

import re

from bridge.contract.cpu_list import CpuListError, check_cpu_list
from bridge.errors import BridgeError
from bridge.proto.nri import api_pb2 as api

_UNIFIED_KEY_RE = re.compile(r"^[a-z0-9_]+\.[a-z0-9_.]+$")
_SYSCTL_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./-]*$")


class ValueProblem(BridgeError):
    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


def check_cpuset(text: str, path: str) -> None:
    """A CPU or memory-node list as the runtime writes it: the contract's grammar
    (bridge.contract.cpu_list), exactly as sent, no whitespace."""
    try:
        check_cpu_list(text)
    except CpuListError as exc:
        if exc.element is None:
            raise ValueProblem(path, f"invalid cpuset {text[:64]!r} (expected e.g. 0-3,8)"
                               ) from None
        raise ValueProblem(path, f"invalid range {exc.element[:64]!r} in cpuset "
                           f"{text[:64]!r}") from None


def _range(value: int, lo: int, hi: int, path: str) -> None:
    if not lo <= value <= hi:
        raise ValueProblem(path, f"{value} out of range [{lo}, {hi}]")


def check_resources(res: api.LinuxResources, path: str) -> None:
    if res.HasField("cpu"):
        cpu, where = res.cpu, f"{path}.cpu"
        if cpu.cpus:
            check_cpuset(cpu.cpus, f"{where}.cpus")
        if cpu.mems:
            check_cpuset(cpu.mems, f"{where}.mems")
        if cpu.HasField("shares"):
            _range(cpu.shares.value, 2, 262144, f"{where}.shares")
        if cpu.HasField("period"):
            _range(cpu.period.value, 1000, 1_000_000, f"{where}.period")
        if cpu.HasField("quota") and cpu.quota.value != -1:
            _range(cpu.quota.value, 1000, 2**63 - 1, f"{where}.quota")
    if res.HasField("memory"):
        mem, where = res.memory, f"{path}.memory"
        for name in ("limit", "reservation", "swap"):
            if mem.HasField(name):
                _range(getattr(mem, name).value, -1, 2**63 - 1, f"{where}.{name}")
        if mem.HasField("swappiness"):
            _range(mem.swappiness.value, 0, 100, f"{where}.swappiness")
    for key in res.unified:
        if not _UNIFIED_KEY_RE.match(key):
            raise ValueProblem(f"{path}.unified", f"{key[:64]!r} is not a cgroup v2 file name")
    for i, limit in enumerate(res.hugepage_limits):
        if not limit.page_size:
            raise ValueProblem(f"{path}.hugepage_limits[{i}].page_size", "must not be empty")


def check_adjustment(adjust: api.ContainerAdjustment, path: str) -> None:
    for key in adjust.annotations:
        if not key.lstrip("-"):
            raise ValueProblem(f"{path}.annotations", "empty annotation key")
    for i, kv in enumerate(adjust.env):
        name = kv.key.removeprefix("-")
        if not name or "=" in name or "\0" in name:
            raise ValueProblem(f"{path}.env[{i}].key", f"invalid variable name {kv.key[:64]!r}")
    for i, mount in enumerate(adjust.mounts):
        if not mount.destination.removeprefix("-").startswith("/"):
            raise ValueProblem(f"{path}.mounts[{i}].destination", "must be an absolute path")
    linux = adjust.linux
    for i, dev in enumerate(linux.devices):
        if not dev.path.removeprefix("-").startswith("/"):
            raise ValueProblem(f"{path}.linux.devices[{i}].path", "must be an absolute path")
    for key in linux.sysctl:
        if not _SYSCTL_RE.match(key.removeprefix("-")):
            raise ValueProblem(f"{path}.linux.sysctl", f"invalid sysctl name {key[:64]!r}")
    if linux.HasField("oom_score_adj"):
        _range(linux.oom_score_adj.value, -1000, 1000, f"{path}.linux.oom_score_adj")
    if linux.HasField("resources"):
        check_resources(linux.resources, f"{path}.linux.resources")
