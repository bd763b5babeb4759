"""The state of ``cpu-pools``: which container holds which exclusive CPUs, and its changes.

Owns classifying a container (exclusive or shared), planning what an event does to the
allocation (``plan_*``: pure, returns an ``Outcome`` and the new table) and committing it. The
shared pool is always every CPU no container holds exclusively; reserved CPUs are never handed
out, and an allocation never leaves fewer than ``min_shared_cpus`` in the shared pool (an empty
cpuset cannot hold a process: cgroup v1 refuses it). Synchronize rebuilds the table from the
containers as the runtime reports them: an exclusive container keeps the CPUs it has if they
are still valid, so a restarted server ends where the old one was. Must not do I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import cast

from policy_server.policies.cpu_pools.allocator import take
from policy_server.policies.cpu_pools.topology import Topology
from policy_server.sdk import Container, NodeView, Pod, format_cpu_list, parse_cpu_list

# kubelet writes cpu.shares = request milliCPU * 1024 / 1000 (MilliCPUToShares), so a
# Guaranteed container with N whole CPUs has shares N*1024 and quota N*period.
SHARES_PER_CPU = 1024
# kubelet's pod cgroup names carry the QoS class of Burstable and BestEffort pods
# (/kubepods/burstable/pod<uid>, kubepods-besteffort-pod<uid>.slice); Guaranteed pods sit
# directly under kubepods.
_NOT_GUARANTEED = ("burstable", "besteffort")

Table = Mapping[str, frozenset[int]]


@dataclass(frozen=True, slots=True)
class Settings:
    """The policy's configuration (see docs/policies/cpu-pools.md)."""

    topology: Topology
    reserved: frozenset[int] = frozenset()
    min_shared_cpus: int = 1
    pin_memory: bool = False

    @property
    def allocatable(self) -> frozenset[int]:
        return self.topology.cpus - self.reserved


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one event did: the answer the handler turns into a decision.

    ``cpus``: the cpuset of the event's container (CreateContainer/UpdateContainer);
    ``refused``: why an exclusive request cannot be met; ``released``: containers whose
    exclusive CPUs went back to the shared pool; ``shared``: the shared pool afterwards and
    ``shared_changed`` whether it moved; ``holders``: the containers holding exclusive CPUs
    afterwards. ``targets`` (Synchronize): every container's cpuset.
    """

    uid: str
    container_id: str = ""
    cpus: frozenset[int] = frozenset()
    exclusive: bool = False
    refused: str | None = None
    released: tuple[str, ...] = ()
    shared: frozenset[int] = frozenset()
    shared_changed: bool = False
    holders: frozenset[str] = frozenset()
    targets: Mapping[str, frozenset[int]] = field(default_factory=lambda: MappingProxyType({}))
    notes: tuple[str, ...] = ()


Plan = tuple[Outcome, Table]


def exclusive_request(pod: Pod | None, container: Container) -> int:
    """Whole CPUs a Guaranteed container asks for; 0 means it shares."""
    if pod is None or any(word in pod.cgroup_parent.lower() for word in _NOT_GUARANTEED):
        return 0
    cpu = container.resources.cpu if container.resources is not None else None
    if cpu is None or not cpu.quota or not cpu.period or cpu.quota <= 0 or cpu.period <= 0:
        return 0  # no CPU limit: not Guaranteed
    if cpu.quota % cpu.period:
        return 0  # a fractional CPU shares
    count = cpu.quota // cpu.period
    # Guaranteed means request == limit; shares says what the request was.
    return count if cpu.shares == count * SHARES_PER_CPU else 0


def current_cpus(container: Container) -> frozenset[int] | None:
    """The cpuset the runtime reports for the container (None if unset or unreadable)."""
    cpus = container.resources.cpu.cpus if container.resources is not None else None
    if not cpus:
        return None
    try:
        return parse_cpu_list(cpus)
    except ValueError:
        return None


def _held(table: Table) -> frozenset[int]:
    return frozenset().union(*table.values()) if table else frozenset()


class CpuPools:
    """The allocation table and the planning around it."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.table: Table = MappingProxyType({})
        self.last: Outcome | None = None

    def snapshot(self) -> object:
        return self.table, self.last  # both immutable: commit replaces them

    def restore(self, snapshot: object) -> None:
        self.table, self.last = cast(tuple[Table, Outcome | None], snapshot)

    def shared(self, table: Table | None = None) -> frozenset[int]:
        return self.settings.topology.cpus - _held(self.table if table is None else table)

    def commit(self, plan: Plan) -> None:
        """Keep the new table and remember what the handler will answer.

        Dry runs commit too, to the engine's dry-run copy (``snapshot``/``restore``: the policy
        registers this object with ``Policy.state``): a shadow webhook or a replay sees the
        whole stream of events as dry runs, and its answers only make sense if each builds on
        the ones before, while the real table stays as real requests left it.
        """
        outcome, table = plan
        self.table = MappingProxyType(dict(table))
        self.last = outcome

    def outcome_for(self, uid: str) -> Outcome | None:
        last = self.last
        return last if last is not None and last.uid == uid else None

    # --- planning ---------------------------------------------------------------------------

    def _allocate(self, table: Table, count: int) -> tuple[frozenset[int] | None, str]:
        s = self.settings
        free = s.allocatable - _held(table)
        spare = len(self.shared(table)) - s.min_shared_cpus
        if count > spare or count > len(free):
            return None, (
                f"needs {count} exclusive CPUs, {min(len(free), max(spare, 0))} can be given "
                f"(free: {format_cpu_list(free) or 'none'}; reserved: "
                f"{format_cpu_list(s.reserved) or 'none'}; the shared pool keeps at least "
                f"{s.min_shared_cpus})"
            )
        return take(s.topology, free, count), ""

    def _moved(self, outcome: Outcome, before: frozenset[int], table: Table) -> Plan:
        """``outcome`` with the shared pool and holders after ``table`` replaces the current one."""
        after = self.shared(table)
        moved = replace(
            outcome, shared=after, shared_changed=after != before, holders=frozenset(table)
        )
        return moved, table

    def plan_create(self, uid: str, pod: Pod | None, container: Container, synced: bool) -> Plan:
        """Allocate for a new container."""
        count = exclusive_request(pod, container)
        before = self.shared()
        if count == 0:
            return Outcome(uid, container.id, before, shared=before), self.table
        if not synced:
            reason = (
                "cpu-pools has not seen the node's containers yet (no Synchronize), so it cannot "
                "tell which CPUs are free; subscribe the webhook to Synchronize"
            )
            return Outcome(uid, container.id, refused=reason, shared=before), self.table
        cpus, why = self._allocate(self.table, count)
        if cpus is None:
            return Outcome(uid, container.id, refused=why, shared=before), self.table
        table = {**self.table, container.id: cpus}
        return self._moved(Outcome(uid, container.id, cpus, exclusive=True), before, table)

    def plan_update(self, uid: str, container: Container) -> Plan:
        held = self.table.get(container.id)
        cpus = held if held is not None else self.shared()
        return Outcome(uid, container.id, cpus, exclusive=held is not None), self.table

    def plan_release(self, uid: str, container_ids: Iterable[str]) -> Plan:
        """Stop/remove: the containers' exclusive CPUs go back to the shared pool."""
        before = self.shared()
        released = tuple(cid for cid in container_ids if cid in self.table)
        table = {cid: cpus for cid, cpus in self.table.items() if cid not in released}
        return self._moved(Outcome(uid, released=released), before, table)

    def plan_sync(self, uid: str, node: NodeView) -> Plan:
        """Rebuild from the runtime's containers: keep valid allocations, redo the others."""
        s = self.settings
        table: dict[str, frozenset[int]] = {}
        pending: list[tuple[Container, int]] = []
        notes: list[str] = []
        for container in node.live_containers():
            count = exclusive_request(node.pod_of(container), container)
            if count == 0:
                continue
            cpus = current_cpus(container)
            if (
                cpus is not None
                and len(cpus) == count
                and cpus <= s.allocatable
                and cpus.isdisjoint(_held(table))
            ):
                table[container.id] = cpus
            else:
                pending.append((container, count))
        for container, count in pending:
            cpus, why = self._allocate(table, count)
            if cpus is None:
                notes.append(f"container {container.name} ({container.id}) stays shared: {why}")
                continue
            table[container.id] = cpus
        shared = self.shared(table)
        targets = MappingProxyType({c.id: table.get(c.id, shared) for c in node.live_containers()})
        outcome = Outcome(
            uid, shared=shared, holders=frozenset(table), targets=targets, notes=tuple(notes)
        )
        return outcome, table
