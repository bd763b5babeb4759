"""Value checks the protobuf types cannot express: cpusets, ranges, names, paths.

`from_json` already guarantees types and integer widths; this module refuses
values the runtime would choke on or that smuggle something past the allow
list (e.g. a cgroup `unified` key with a path in it). One check per adjustable
field (`CHECKS`), run by the reply walk as it passes that field; each raises
`ValueProblem(path, problem)`; callers decide what a problem means.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from bridge.contract.cpu_list_grammar import CpuListError, check_cpu_list
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
    (bridge.contract.cpu_list_grammar), exactly as sent, no whitespace."""
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


def _cpu(cpu: api.LinuxCPU, where: str) -> None:
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


def _memory(mem: api.LinuxMemory, where: str) -> None:
    for name in ("limit", "reservation", "swap"):
        if mem.HasField(name):
            _range(getattr(mem, name).value, -1, 2**63 - 1, f"{where}.{name}")
    if mem.HasField("swappiness"):
        _range(mem.swappiness.value, 0, 100, f"{where}.swappiness")


def _unified(unified: Mapping[str, str], where: str) -> None:
    for key in unified:
        if not _UNIFIED_KEY_RE.match(key):
            raise ValueProblem(where, f"{key[:64]!r} is not a cgroup v2 file name")


def _hugepage_limits(limits: Sequence[api.HugepageLimit], where: str) -> None:
    for i, limit in enumerate(limits):
        if not limit.page_size:
            raise ValueProblem(f"{where}[{i}].page_size", "must not be empty")


def _annotations(annotations: Mapping[str, str], where: str) -> None:
    for key in annotations:
        if not key.lstrip("-"):
            raise ValueProblem(where, "empty annotation key")


def _env(env: Sequence[api.KeyValue], where: str) -> None:
    for i, kv in enumerate(env):
        name = kv.key.removeprefix("-")
        if not name or "=" in name or "\0" in name:
            raise ValueProblem(f"{where}[{i}].key", f"invalid variable name {kv.key[:64]!r}")


def _mounts(mounts: Sequence[api.Mount], where: str) -> None:
    for i, mount in enumerate(mounts):
        if not mount.destination.removeprefix("-").startswith("/"):
            raise ValueProblem(f"{where}[{i}].destination", "must be an absolute path")


def _devices(devices: Sequence[api.LinuxDevice], where: str) -> None:
    for i, dev in enumerate(devices):
        if not dev.path.removeprefix("-").startswith("/"):
            raise ValueProblem(f"{where}[{i}].path", "must be an absolute path")


def _sysctl(sysctl: Mapping[str, str], where: str) -> None:
    for key in sysctl:
        if not _SYSCTL_RE.match(key.removeprefix("-")):
            raise ValueProblem(where, f"invalid sysctl name {key[:64]!r}")


def _oom_score_adj(value: api.OptionalInt, where: str) -> None:
    _range(value.value, -1000, 1000, where)


# Field path (as in the webhook JSON, below `adjust` or an update) -> its check, called with
# the field's value and its JSON path in the reply. Fields not named here need none beyond
# their types. The reply walk (bridge.webhooks.reply_walk) calls these as it passes the field.
CHECKS: Mapping[str, Callable[[Any, str], None]] = MappingProxyType({
    "annotations": _annotations,
    "mounts": _mounts,
    "env": _env,
    "linux.devices": _devices,
    "linux.sysctl": _sysctl,
    "linux.oom_score_adj": _oom_score_adj,
    "linux.resources.cpu": _cpu,
    "linux.resources.memory": _memory,
    "linux.resources.unified": _unified,
    "linux.resources.hugepage_limits": _hugepage_limits,
})
