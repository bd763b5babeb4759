"""``cpu-pools``: exclusive CPUs for Guaranteed containers, a shared pool for everyone else.

A CRI-RM-style resource policy. A container of a Guaranteed pod whose CPU request is a whole
number gets that many CPUs of its own (topology-aware, see ``allocator``); every other container
runs on the shared pool, which is all CPUs nobody holds exclusively. When an exclusive container
comes or goes, every shared container is moved to the new shared pool: in the CreateContainer
and StopContainer replies (NRI lets those carry updates of other containers), and through the
bridge (``Decision.push``) at RemoveContainer and RemovePodSandbox, whose replies cannot.
Synchronize, the real one or the one the server builds from the bridge's state at startup,
rebuilds the allocation from what the runtime reports, so a restart loses nothing.

Owns the handlers and the configuration; the state lives in ``pools``, registered with the
SDK so that a dry run (shadow mode, ``nri-webhook-bridge replay`` and ``try``) never changes
the real allocation. Handlers only read: the observer plans and commits each event before they
run. Must not do I/O after ``build``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator

from policy_server.policies.cpu_pools.pools import (
    CpuPools,
    Outcome,
    Plan,
    Settings,
    current_cpus,
)
from policy_server.policies.cpu_pools.topology import (
    SYSFS_CPU,
    Topology,
    TopologyError,
    from_layout,
    from_sysfs,
)
from policy_server.policies.policy_config import (
    NonEmptyString,
    PolicyConfig,
    PolicySettings,
)
from policy_server.policies.policy_config import (
    mapping_value as _mapping,
)
from policy_server.sdk import (
    Adjustment,
    ContainerUpdate,
    Decision,
    Event,
    EventName,
    NodeView,
    Policy,
    ResourcePatch,
    format_cpu_list,
    parse_cpu_list,
)

NAME = "cpu-pools"
DESCRIPTION = "exclusive CPUs for Guaranteed containers with whole CPUs, a shared pool for the rest"
EVENTS = (
    EventName.SYNCHRONIZE,
    EventName.CREATE_CONTAINER,
    EventName.UPDATE_CONTAINER,
    EventName.STOP_CONTAINER,
    EventName.REMOVE_CONTAINER,
    EventName.REMOVE_POD_SANDBOX,
)

__all__ = ["DESCRIPTION", "NAME", "build", "build_cpu_pools", "settings_from"]


def _min_shared(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"expected an integer >= 1 (an empty cpuset holds no process), got {value!r}"
        )
    return value


def _pin(value: object) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {value!r}")
    return value


def _cpus(value: object) -> frozenset[int] | None:
    return None if value is None else parse_cpu_list(str(value))


def _layout(value: object) -> object:
    return None if value is None else _mapping(value)


class _Config(PolicyConfig):
    layout: Annotated[dict[Any, Any] | None, BeforeValidator(_layout)] = None
    sysfs: NonEmptyString = str(SYSFS_CPU)
    reserved_cpus: Annotated[frozenset[int] | None, BeforeValidator(_cpus)] = None
    min_shared_cpus: Annotated[int, BeforeValidator(_min_shared)] = 1
    pin_memory: Annotated[bool | None, BeforeValidator(_pin)] = None


def settings_from(settings: PolicySettings) -> Settings:
    """Read and check the configuration (``settings.error`` names the bad key)."""
    config = settings.parse(_Config)
    try:
        if config.layout is not None:
            if "sysfs" in config.model_fields_set:
                raise settings.error("layout", "give either layout or sysfs, not both")
            topology: Topology = from_layout(config.layout)
            # A layout names CPUs by hand: the node must have them (NodeFacts.topology).
            problem = settings.node.topology.cpus_problem(format_cpu_list(topology.cpus))
            if problem is not None:
                raise settings.error("layout", problem)
        else:
            topology = from_sysfs(Path(config.sysfs))
    except TopologyError as exc:
        raise settings.error("", str(exc)) from None
    reserved = config.reserved_cpus or frozenset()
    if not reserved <= topology.cpus:
        unknown = format_cpu_list(reserved - topology.cpus)
        raise settings.error("reserved_cpus", f"CPUs {unknown} are not in the topology")
    minimum = config.min_shared_cpus
    if minimum > len(topology.cpus):
        raise settings.error("min_shared_cpus", f"the node has only {len(topology.cpus)} CPUs")
    pin = config.pin_memory
    if pin is None:  # real NUMA nodes from sysfs: pin memory too; a layout may be fictional
        pin = config.layout is None and len(topology.nodes) > 1
    return Settings(topology, reserved, minimum, pin)


def build(settings: PolicySettings) -> Policy[None]:
    """The catalogue's entry point (``--policy cpu-pools[=FILE]``)."""
    return build_cpu_pools(settings_from(settings))


def build_cpu_pools(settings: Settings) -> Policy[None]:
    policy = Policy(NAME, description=DESCRIPTION)
    pools = policy.state(CpuPools(settings))  # a dry run leaves the real table alone

    @policy.observe(*EVENTS)
    def track(event: Event, *, node: NodeView) -> None:
        plan = _plan(pools, event, node)
        if plan is not None:
            pools.commit(plan)

    @policy.on(EventName.CREATE_CONTAINER)
    def place(event: Event, *, node: NodeView) -> Decision | None:
        outcome = pools.outcome_for(event.uid)
        if outcome is None or not outcome.container_id:
            return None
        if outcome.refused is not None:
            return Decision(reject=f"cpu-pools: {outcome.refused}")
        mems = _mems(settings, outcome.cpus) if outcome.exclusive else None
        patch = ResourcePatch(cpu_cpus=format_cpu_list(outcome.cpus), cpu_mems=mems)
        update = _move_shared(outcome, node, skip=outcome.container_id)
        return Decision(adjust=Adjustment(resources=patch), update=update)

    @policy.on(EventName.UPDATE_CONTAINER)
    def keep(event: Event) -> Decision | None:
        # kubelet re-applies the pod spec's resources; the container stays in its pool.
        outcome = pools.outcome_for(event.uid)
        if outcome is None or event.container is None:
            return None
        requested = event.linux_resources.cpu.cpus if event.linux_resources else None
        if requested and _same(requested, outcome.cpus):
            return None
        patch = ResourcePatch(cpu_cpus=format_cpu_list(outcome.cpus))
        return Decision(update=(ContainerUpdate(event.container.id, patch),))

    @policy.on(EventName.STOP_CONTAINER)
    def release(event: Event, *, node: NodeView) -> Decision | None:
        outcome = pools.outcome_for(event.uid)
        if outcome is None or not outcome.shared_changed:
            return None
        return Decision(update=_move_shared(outcome, node))

    @policy.on(EventName.REMOVE_CONTAINER, EventName.REMOVE_POD_SANDBOX)
    def release_late(event: Event, *, node: NodeView) -> Decision | None:
        # Removed without a StopContainer first: these replies cannot carry updates.
        outcome = pools.outcome_for(event.uid)
        if outcome is None or not outcome.shared_changed:
            return None
        return Decision(push=_move_shared(outcome, node))

    @policy.on(EventName.SYNCHRONIZE)
    def reconcile(event: Event, *, node: NodeView) -> Decision | None:
        outcome = pools.outcome_for(event.uid)
        if outcome is None:
            return None
        updates = []
        for container in node.live_containers():
            target = outcome.targets.get(container.id)
            if target is None or current_cpus(container) == target:
                continue
            exclusive = target != outcome.shared
            mems = _mems(settings, target) if exclusive else None
            patch = ResourcePatch(cpu_cpus=format_cpu_list(target), cpu_mems=mems)
            updates.append(ContainerUpdate(container.id, patch))
        return Decision(update=tuple(updates), warnings=outcome.notes)

    return policy


def _plan(pools: CpuPools, event: Event, node: NodeView) -> Plan | None:
    name, uid = event.name, event.uid
    if name is EventName.SYNCHRONIZE:
        return pools.plan_sync(uid, node)
    if name is EventName.REMOVE_POD_SANDBOX:
        # The view has already dropped the pod's containers: what the table holds for
        # containers the view no longer lists is theirs (entries only come from events the
        # view has seen, and only removals drop containers from it).
        return pools.plan_release(uid, [cid for cid in pools.table if cid not in node.containers])
    container = event.container
    if container is None:
        return None
    if name is EventName.CREATE_CONTAINER:
        return pools.plan_create(uid, event.pod, container, node.synced)
    if name is EventName.UPDATE_CONTAINER:
        return pools.plan_update(uid, container)
    return pools.plan_release(uid, (container.id,))


def _move_shared(outcome: Outcome, node: NodeView, skip: str = "") -> tuple[ContainerUpdate, ...]:
    """Updates moving every live shared container to the shared pool of ``outcome``."""
    if not outcome.shared_changed:
        return ()
    patch = ResourcePatch(cpu_cpus=format_cpu_list(outcome.shared))
    return tuple(
        ContainerUpdate(c.id, patch)
        for c in node.live_containers()
        if c.id != skip and c.id not in outcome.holders
    )


def _mems(settings: Settings, cpus: frozenset[int]) -> str | None:
    if not settings.pin_memory:
        return None
    return format_cpu_list(settings.topology.node_of(cpu) for cpu in cpus)


def _same(cpus: str, target: frozenset[int]) -> bool:
    try:
        return parse_cpu_list(cpus) == target
    except ValueError:
        return False
