"""The ``koordinator-qos`` policy: koordlet's hooks as SDK handlers, in koordlet's order.

Owns the hook table (name, feature gate, stages) and the adapters from hook results to
decisions per event. Hooks of one event run sorted by koordlet hook name in byte order
(upper-case first), so a later hook wins a conflict exactly as in koordlet, and the conflict is
reported. What a hook refused because pod metadata asked for more than kubelet gave
(``authority``) is a reply warning and is counted (``Refusals``, the policy's counters; dry runs
are not counted). Pure apart from the quota baselines its observer keeps in memory and the counts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from policy_server.policies.koordinator_qos.authority import Refusal, Refusals
from policy_server.policies.koordinator_qos.baselines import QuotaBaselines
from policy_server.policies.koordinator_qos.hooks import (
    batch,
    cpuset,
    gpu,
    group_identity,
    normalization,
    oom,
    resctrl,
)
from policy_server.policies.koordinator_qos.reconcile import reconcile
from policy_server.policies.koordinator_qos.rules import Rules
from policy_server.policies.koordinator_qos.target import (
    ContainerTarget,
    HookResult,
    HookSpec,
    Kubelet,
    PodTarget,
    Stage,
)
from policy_server.sdk import (
    UNKNOWN_NODE,
    Adjustment,
    ContainerUpdate,
    Decision,
    Event,
    EventName,
    FailurePolicy,
    NodeFacts,
    Pod,
    Policy,
)

POLICY_NAME = "koordinator-qos"

_CREATE, _UPDATE, _RECONCILE = Stage.CREATE_CONTAINER, Stage.UPDATE_CONTAINER, Stage.RECONCILE

HOOKS: tuple[HookSpec, ...] = (
    HookSpec(
        "BatchResource",
        lambda f: f.BatchResource,
        pod=batch.pod,
        container=batch.container,
        container_stages=frozenset({_CREATE, _UPDATE, _RECONCILE}),
    ),
    # RunPodSandbox is a no-op for CPUNormalization in NRI mode (no pod resources), so no pod hook.
    HookSpec(
        "CPUNormalization",
        lambda f: f.CPUNormalization,
        container=normalization.container,
        container_stages=frozenset({_CREATE, _UPDATE, _RECONCILE}),
    ),
    HookSpec(
        "CPUSetAllocator",
        lambda f: f.CPUSetAllocator,
        pod=cpuset.pod,
        container=cpuset.container,
        container_stages=frozenset({_CREATE, _UPDATE, _RECONCILE}),
    ),
    # Container-level GroupIdentity is our NRI mapping of koordlet's pod-level write.
    HookSpec(
        "GroupIdentity",
        lambda f: f.GroupIdentity,
        pod=group_identity.pod,
        container=group_identity.container,
        container_stages=frozenset({_CREATE, _RECONCILE}),
    ),
    # koordlet runs OOMScoreAdj from its reconciler only; NRI can set it at creation.
    HookSpec(
        "OOMScoreAdj",
        lambda f: f.OOMScoreAdj,
        container=oom.container,
        container_stages=frozenset({_CREATE}),
    ),
    HookSpec(
        "Resctrl",
        lambda f: f.Resctrl,
        pod=resctrl.pod,
        container=resctrl.container,
        container_stages=frozenset({_CREATE}),
        remove_pod=resctrl.remove_pod,
    ),
    HookSpec(
        "gpu env inject",
        lambda f: f.GPUEnvInject,
        container=gpu.container,
        container_stages=frozenset({_CREATE}),
    ),
)
assert [h.name for h in HOOKS] == sorted(h.name for h in HOOKS), "hooks must be in byte order"


@dataclass(frozen=True, slots=True)
class KoordContext:
    """What every handler reads besides the event: the rules, the quota baselines and the
    facts about the node (its cgroup version and containers' cgroup files decide whether
    containers may get ``unified`` keys, whatever the rules say)."""

    rules: Rules
    baselines: Mapping[str, int]
    node: NodeFacts = UNKNOWN_NODE
    refusals: Refusals | None = None

    def refused(self, event: Event, refusals: tuple[Refusal, ...]) -> tuple[str, ...]:
        """Count ``refusals`` (not for a dry run); their warnings."""
        if self.refusals is not None and not event.dry_run:
            self.refusals.record(refusals)
        return tuple(r.message() for r in refusals)


Handler = Callable[[Event, KoordContext], Decision | None]


class _Targets:
    """Build each event's targets once, not once per hook (an identity cache of one event).

    Holding the event keeps its id from being reused; handlers run one at a time.
    """

    event: Event | None = None
    pod: PodTarget | None = None
    container: ContainerTarget | None = None
    reported: bool = False

    @classmethod
    def _switch(cls, event: Event) -> None:
        if cls.event is not event:
            cls.event, cls.pod, cls.container, cls.reported = event, None, None, False

    @classmethod
    def pod_of(cls, event: Event, pod: Pod, rules: Rules) -> PodTarget:
        cls._switch(event)
        if cls.pod is None:
            cls.pod = PodTarget.of(pod, rules.trust)
        return cls.pod

    @classmethod
    def class_refusals(cls, event: Event) -> tuple[Refusal, ...]:
        """The pod's classification refusals, once per event (the first handler says them)."""
        cls._switch(event)
        if cls.reported or cls.pod is None:
            return ()
        cls.reported = True
        return cls.pod.refusals

    @classmethod
    def container_of(cls, event: Event, node: NodeFacts, rules: Rules) -> ContainerTarget:
        """The event's container; its quota is the requested one for UpdateContainer."""
        cls._switch(event)
        if cls.container is None:
            assert event.pod is not None and event.container is not None
            container = event.container
            # UpdateContainer: we start from the resources the update asks for (koordlet reads
            # the current ones and so works on stale values).
            resources = event.linux_resources or container.resources
            quota = resources.cpu.quota if resources is not None else None
            pod = cls.pod_of(event, event.pod, rules)
            kubelet = Kubelet.of(container, resources)
            cls.container = ContainerTarget(
                pod, container.id, container.name, quota, node, kubelet
            )
        return cls.container


def _warnings(r: HookResult | None, event: Event, ctx: KoordContext) -> tuple[str, ...]:
    """The hook's warnings and refusals, with the pod's class refusal on the event's first."""
    refusals = _Targets.class_refusals(event) + (r.refusals if r is not None else ())
    return (r.warnings if r is not None else ()) + ctx.refused(event, refusals)


def _only_warnings(event: Event, ctx: KoordContext) -> Decision | None:
    """A hook with nothing to say: the class refusal still reaches the reply once."""
    warnings = _warnings(None, event, ctx)
    return Decision(warnings=warnings) if warnings else None


def _pod_handler(spec: HookSpec, remove: bool = False) -> Handler:
    hook = spec.remove_pod if remove else spec.pod
    assert hook is not None

    def handle(event: Event, ctx: KoordContext) -> Decision | None:
        if event.pod is None or not spec.gate(ctx.rules.features):
            return None
        r = hook(_Targets.pod_of(event, event.pod, ctx.rules), ctx.rules)
        if r is None:
            return _only_warnings(event, ctx)
        return Decision(warnings=_warnings(r, event, ctx), errors=r.errors, effects=r.effects)

    return handle


def _create_handler(spec: HookSpec) -> Handler:
    hook = spec.container
    assert hook is not None

    def handle(event: Event, ctx: KoordContext) -> Decision | None:
        container = event.container
        if container is None or not spec.gate(ctx.rules.features):
            return None
        target = _Targets.container_of(event, ctx.node, ctx.rules)
        r = hook(target, Stage.CREATE_CONTAINER, ctx.rules)
        if r is None:
            return _only_warnings(event, ctx)
        adjust = None
        if r.env or r.mounts or r.oom_score_adj is not None or not r.resources.is_empty():
            adjust = Adjustment(
                env=r.env, mounts=r.mounts, resources=r.resources, oom_score_adj=r.oom_score_adj
            )
        warnings = _warnings(r, event, ctx)
        return Decision(adjust=adjust, warnings=warnings, errors=r.errors, effects=r.effects)

    return handle


def _update_handler(spec: HookSpec) -> Handler:
    hook = spec.container
    assert hook is not None

    def handle(event: Event, ctx: KoordContext) -> Decision | None:
        container = event.container
        if container is None or not spec.gate(ctx.rules.features):
            return None
        target = _Targets.container_of(event, ctx.node, ctx.rules)
        r = hook(target, Stage.UPDATE_CONTAINER, ctx.rules)
        if r is None:
            return _only_warnings(event, ctx)
        # The update names the container (koordlet leaves the ContainerUpdate's id empty).
        update = (ContainerUpdate(container.id, r.resources),) if not r.resources.is_empty() else ()
        return Decision(update=update, warnings=_warnings(r, event, ctx), errors=r.errors)

    return handle


def build_policy(
    rules: Callable[[], Rules],
    baselines: QuotaBaselines | None = None,
    node: NodeFacts = UNKNOWN_NODE,
    refusals: Refusals | None = None,
) -> Policy[KoordContext]:
    """The policy, reading the current rules through ``rules`` at every evaluation; ``node``
    holds what the server found out about the host at start-up; ``refusals`` counts what pod
    metadata was refused (exported as the policy's counters)."""
    store = baselines if baselines is not None else QuotaBaselines()
    tally = refusals if refusals is not None else Refusals(POLICY_NAME)

    def context() -> KoordContext:
        return KoordContext(rules(), store.view(), node, tally)

    def failure_policy(ctx: KoordContext) -> FailurePolicy:
        return ctx.rules.failure_policy

    policy = Policy(
        POLICY_NAME,
        context=context,
        description="koordinator koordlet runtime-hook QoS (CPU sets, batch resources, group "
        "identity, CPU normalization, GPU env, OOM score, resctrl class)",
        failure_policy=failure_policy,
    )
    for spec in HOOKS:
        if spec.pod is not None:
            policy.on(EventName.RUN_POD_SANDBOX, name=spec.name)(_pod_handler(spec))
        if spec.remove_pod is not None:
            policy.on(EventName.REMOVE_POD_SANDBOX, name=spec.name)(_pod_handler(spec, True))
        if _CREATE in spec.container_stages:
            policy.on(EventName.CREATE_CONTAINER, name=spec.name)(_create_handler(spec))
        if _UPDATE in spec.container_stages:
            policy.on(EventName.UPDATE_CONTAINER, name=spec.name)(_update_handler(spec))

    @policy.on(EventName.SYNCHRONIZE, name="Reconcile")
    def synchronize(event: Event, ctx: KoordContext) -> Decision:
        refusals: list[Refusal] = []
        decision = reconcile(event, ctx.rules, ctx.baselines, HOOKS, ctx.node, refusals)
        ctx.refused(event, tuple(refusals))
        return decision

    policy.counters(tally.samples)

    policy.state(store)  # dry runs learn into a copy, never into the real baselines
    policy.observe(
        EventName.CREATE_CONTAINER,
        EventName.UPDATE_CONTAINER,
        EventName.REMOVE_CONTAINER,
        EventName.SYNCHRONIZE,
    )(store.observe)
    return policy
