"""Existing containers (docs/koordinator.md#existing-containers-the-reconciler): what koordlet's
reconciler does, as NRI container updates.

For Synchronize (and the synthetic Synchronize the server runs after a rule change) every
container hook runs in reconcile mode for every listed container; the merged desired resources
are compared with what the container has now and only the differences become updates. Pod-level
values come back as effects for the executor. Pure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import replace

from policy_server.policies.koordinator_qos.authority import Refusal
from policy_server.policies.koordinator_qos.rules import Rules
from policy_server.policies.koordinator_qos.target import (
    ContainerTarget,
    HookSpec,
    Kubelet,
    PodTarget,
    Stage,
)
from policy_server.sdk import (
    Container,
    ContainerUpdate,
    Decision,
    Effect,
    Event,
    NodeFacts,
    PolicyError,
    ResourcePatch,
    Resources,
    merge,
    parse_cpu_list,
)

# Containers in this state cannot be updated any more.
_SKIPPED_STATES = frozenset({"CONTAINER_STOPPED"})
# Value a unified key has when nobody ever wrote it (new cgroups start with bvt 0).
_UNIFIED_DEFAULTS = {"cpu.bvt_warp_ns": "0"}


def _unlimited(value: int | None) -> int:
    """Quota and memory limit: unset, zero and negative all mean unlimited (-1)."""
    return -1 if value is None or value <= 0 else value


def _same_cpus(current: str | None, desired: str) -> bool:
    if current is None:
        return False
    try:
        return parse_cpu_list(current) == parse_cpu_list(desired)
    except ValueError:
        return current.strip() == desired.strip()


def diff(current: Resources | None, desired: ResourcePatch) -> ResourcePatch:
    """The part of ``desired`` that differs from ``current``."""
    cur = current or Resources()
    shares = desired.cpu_shares
    if shares is not None and shares == cur.cpu.shares:
        shares = None
    quota = desired.cpu_quota
    if quota is not None and _unlimited(quota) == _unlimited(cur.cpu.quota):
        quota = None
    cpus = desired.cpu_cpus or None  # "" is a no-op in NRI
    if cpus is not None and _same_cpus(cur.cpu.cpus, cpus):
        cpus = None
    limit = desired.memory_limit
    if limit is not None and _unlimited(limit) == _unlimited(cur.memory.limit):
        limit = None
    unified = {
        key: value
        for key, value in desired.unified.items()
        if cur.unified.get(key, _UNIFIED_DEFAULTS.get(key)) != value
    }
    rdt = desired.rdt_class if desired.rdt_class != cur.rdt_class else None
    return ResourcePatch(
        cpu_shares=shares,
        cpu_quota=quota,
        cpu_cpus=cpus,
        memory_limit=limit,
        unified=unified,
        rdt_class=rdt,
    )


def _desired(
    target: ContainerTarget,
    hooks: tuple[HookSpec, ...],
    rules: Rules,
    warnings: list[str],
    refusals: list[Refusal],
) -> ResourcePatch:
    outputs: list[tuple[str, Decision]] = []
    for spec in hooks:
        assert spec.container is not None
        try:
            result = spec.container(target, Stage.RECONCILE, rules)
        except PolicyError as exc:
            warnings.append(f"{spec.name}: pod {target.pod.label}: {exc}")
            continue
        if result is None:
            continue
        warnings.extend(result.warnings)
        warnings.extend(f"{spec.name}: {e}" for e in result.errors)
        refusals.extend(result.refusals)
        warnings.extend(r.message() for r in result.refusals)
        upd = ContainerUpdate(target.container_id, result.resources)
        outputs.append((spec.name, Decision(update=(upd,))))
    merged = merge(outputs)
    warnings.extend(c.message() for c in merged.conflicts)
    return merged.decision.update[0].resources if merged.decision.update else ResourcePatch()


def _pod_effects(
    target: PodTarget,
    hooks: tuple[HookSpec, ...],
    rules: Rules,
    warnings: list[str],
    refusals: list[Refusal],
) -> list[Effect]:
    effects: list[Effect] = []
    for spec in hooks:
        assert spec.pod is not None
        try:
            result = spec.pod(target, rules)
        except PolicyError as exc:
            warnings.append(f"{spec.name}: pod {target.label}: {exc}")
            continue
        if result is not None:
            effects.extend(result.effects)
            refusals.extend(result.refusals)
            warnings.extend(r.message() for r in result.refusals)
    return effects


def reconcile(
    event: Event,
    rules: Rules,
    baselines: Mapping[str, int],
    hooks: tuple[HookSpec, ...],
    node: NodeFacts,
    refusals: list[Refusal] | None = None,
) -> Decision:
    """Updates for every listed container whose resources the rules change, plus pod effects.
    What pod metadata asked for beyond kubelet's decision is a warning, appended to
    ``refusals``; a container's floor is what it has now (or its remembered quota).

    ``node`` goes into every container target: no hook asks for a ``unified`` key the node
    cannot take (cgroup v1, or a file its containers' cgroups lack), so no update carries one
    (runc would refuse the whole update).
    """
    enabled = tuple(h for h in hooks if h.gate(rules.features))
    container_hooks = tuple(
        h for h in enabled if h.container is not None and Stage.RECONCILE in h.container_stages
    )
    pod_hooks = tuple(h for h in enabled if h.pod is not None)
    pods = {p.id: PodTarget.of(p, rules.trust) for p in event.pods}
    warnings: list[str] = []
    refused: list[Refusal] = refusals if refusals is not None else []
    effects: list[Effect] = []
    for pod_target in pods.values():
        refused.extend(pod_target.refusals)
        warnings.extend(r.message() for r in pod_target.refusals)
        effects.extend(_pod_effects(pod_target, pod_hooks, rules, warnings, refused))
    updates: list[ContainerUpdate] = []
    for container in event.containers:
        update = _reconcile_container(
            container, pods, rules, baselines, container_hooks, (warnings, refused), node
        )
        if update is not None:
            updates.append(update)
    return Decision(update=tuple(updates), warnings=_counted(warnings), effects=tuple(effects))


def _reconcile_container(
    container: Container,
    pods: Mapping[str, PodTarget],
    rules: Rules,
    baselines: Mapping[str, int],
    hooks: tuple[HookSpec, ...],
    out: tuple[list[str], list[Refusal]],
    node: NodeFacts,
) -> ContainerUpdate | None:
    warnings, refusals = out
    if container.state in _SKIPPED_STATES:
        return None
    pod_target = pods.get(container.pod_sandbox_id)
    if pod_target is None:
        warnings.append("Reconcile: container's pod is not in the pod list; skipped")
        return None
    quota = baselines.get(container.id)
    if quota is None:
        current = container.resources.cpu.quota if container.resources else None
        if current is None or current <= 0:
            quota = 0  # no CFS limit now, so none was ever scaled: nothing to recompute
    # The floor: what the container has now, with the quota kubelet asked for when remembered.
    floor = container.resources
    if floor is not None and baselines.get(container.id) is not None:
        floor = replace(floor, cpu=replace(floor.cpu, quota=baselines[container.id]))
    kubelet = Kubelet.of(container, floor, reconcile=True)
    target = ContainerTarget(
        pod_target, container.id, container.name, quota=quota, node=node, kubelet=kubelet
    )
    patch = diff(container.resources, _desired(target, hooks, rules, warnings, refusals))
    return None if patch.is_empty() else ContainerUpdate(container.id, patch)


def _counted(warnings: list[str]) -> tuple[str, ...]:
    """Collapse repeated warnings into one line with a count (a node has many containers)."""
    return tuple(
        message if count == 1 else f"{message} (x{count})"
        for message, count in Counter(warnings).items()
    )
