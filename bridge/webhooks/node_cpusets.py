"""The node's CPUs and memory nodes, read from sysfs: what a reply's cpuset is bounded by.

`<sysfs_root>/devices/system/cpu/online` lists the CPUs the kernel has online and
`<sysfs_root>/devices/system/node/online` the memory (NUMA) nodes; a kernel without NUMA has no
`devices/system/node` and one memory node, 0. A container's `cpuset.cpus` or `cpuset.mems`
naming others is refused by the kernel, so the runtime fails the container (runc:
`failed to write "0-15": .../cpuset.cpus: numerical result out of range` on a 2-CPU node). The
bridge refuses such a reply (`linux.resources.cpu.cpus` / `.mems` of an adjustment or an update)
as an invalid reply: a failed webhook call, which takes that webhook's failure policy. No `allow`
entry lifts it: no runtime could apply it. The grammar of the lists is the contract's
(bridge.contract.value_rules, checked before); only the node-dependent bound is here.

Owns the read (once per reply that sets a cpuset: CPUs come and go with hotplug) and the
check. Must not fail an event when sysfs cannot be read: an unreadable list is "not known" and
bounds nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bridge.contract.cpu_list_grammar import CpuListError, format_cpu_list, parse_cpu_list
from bridge.node_cpu_lists import read_cpu_list
from bridge.proto.nri import api_pb2 as api
from bridge.webhooks.values import ValueProblem


@dataclass(frozen=True, slots=True)
class NodeCpus:
    """Online CPUs and memory nodes; None: not known (nothing is checked against it)."""

    cpus: frozenset[int] | None = None
    mems: frozenset[int] | None = None


UNKNOWN = NodeCpus()


def read_node_cpus(sysfs_root: str) -> NodeCpus:
    system = Path(sysfs_root) / "devices" / "system"
    cpus = read_cpu_list(system / "cpu" / "online")
    if (system / "node").is_dir():
        mems = read_cpu_list(system / "node" / "online")
    else:
        mems = None if cpus is None else frozenset({0})  # no NUMA: one memory node
    return NodeCpus(cpus, mems)


def _check(text: str, have: frozenset[int] | None, what: str, path: str) -> None:
    if not text or have is None:
        return
    try:
        wanted = parse_cpu_list(text)
    except CpuListError:
        return  # the grammar's check refuses it first
    missing = wanted - have
    if missing:
        held = format_cpu_list(have) if have else "none"
        raise ValueProblem(path, f"{text[:80]!r} names {what} {format_cpu_list(missing)[:80]} "
                           f"the node does not have (online: {held}); the runtime would fail "
                           "the container")


def check_node_cpuset(resources: api.LinuxResources, node: NodeCpus, path: str) -> None:
    """ValueProblem if `resources.cpu.cpus` or `.mems` lie outside `node`."""
    if not resources.HasField("cpu"):
        return
    _check(resources.cpu.cpus, node.cpus, "CPUs", f"{path}.cpu.cpus")
    _check(resources.cpu.mems, node.mems, "memory nodes", f"{path}.cpu.mems")
