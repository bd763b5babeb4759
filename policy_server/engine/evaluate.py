"""Evaluate one event against one policy: run its handlers, merge, apply the failure policy.

Owns the handler boundary: a handler's ``PolicyError`` is an expected outcome, any other
exception is a bug that is logged with its traceback; neither ever escapes. Owns the node view
too: every request is folded into it before the policy's observers and handlers run, when some
policy reads the view (``Registry.reads_node``: a handler or observer taking ``node``). When
none does, nothing is folded: no policy can tell (the view is only read through ``node``), so
skipping the fold is exact. Owns what the request path builds for a policy as well
(``needs_payload``): a ``Payload.BODY`` policy's handlers get the event without its typed
payload (``request_event.without_payload``), which the request path then does not build unless
the fold needs it. Also drops reply parts the event cannot carry (an ``adjust`` outside
CreateContainer) or the node cannot: ``unified`` keys on cgroup v1, which runc refuses (a reply
warning each time), and on cgroup v2 ``unified`` keys whose file the node's containers lack,
which runc fails to open (a log warning once per policy and key, not one per request). Owns dry
runs as well: a ``dry_run`` request is answered as a real one would be, but against the dry-run
copy of the node view and of the policy's registered state (``Policy.state``), never the real
ones. The copy is taken from the real state at the policy's first dry run and again at every
dry-run Synchronize; dry runs after that build on each other (a shadow-mode stream, a replay,
one ``try`` run), real requests never see them. Must not import web frameworks or do I/O;
effects are returned, not executed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bridge.contract.catalogue import REPLY_KEYS, REQUEST_PAYLOAD, EventName
from bridge.reply_review.handler_crash import crash_note
from policy_server.engine.request_event import names_of, without_payload
from policy_server.exceptions import PolicyError, UnknownPolicyError
from policy_server.sdk.decision import ContainerUpdate, Decision, amended
from policy_server.sdk.decision_merge import Conflict, merge
from policy_server.sdk.model import Event
from policy_server.sdk.node_facts import UNKNOWN_NODE, NodeFacts
from policy_server.sdk.node_view import NodeSnapshot, NodeState
from policy_server.sdk.registry import FailurePolicy, Payload, Policy, Registry
from policy_server.sdk.resource_patch import ResourcePatch

log = logging.getLogger(__name__)
# Events whose requests name a pod or a container (not Synchronize's lists).
_NAMED_EVENTS = frozenset(
    name for name in EventName if {"pod", "container"} & set(REQUEST_PAYLOAD[name.value])
)

# (policy, unified key) pairs whose drop was logged; beyond this many, drops are not logged.
MAX_LOGGED_DROPS = 1024


@dataclass(frozen=True, slots=True)
class Evaluation:
    """The outcome of one evaluation: the merged decision (built once: the engine's changes to
    it drop parts, never rebuild it; the reply is encoded from it, once, at the end:
    ``engine.reply``), the warnings the engine adds after the decision's (``notes``: a failing
    handler under ``Ignore``, parts the node or the event cannot take) and what the server
    counts about it."""

    policy: str
    event: Event
    decision: Decision
    conflicts: tuple[Conflict, ...]
    failed_handlers: tuple[str, ...]
    duration_s: float
    notes: tuple[str, ...] = ()


def describe(event: Event) -> str:
    """``event=... uid=... pod=ns/name container=name`` for log lines; for an event without its
    typed payload (a ``Payload.BODY`` policy's) the names are read from its body."""
    parts = [f"event={event.name}", f"uid={event.uid}"]
    pod = f"{event.pod.namespace}/{event.pod.name}" if event.pod is not None else None
    container = event.container.name if event.container is not None else None
    if pod is None and container is None and event.body and event.name in _NAMED_EVENTS:
        pod, container = names_of(event.body)
    if pod is not None:
        parts.append(f"pod={pod}")
    if container is not None:
        parts.append(f"container={container}")
    return " ".join(parts)


class Engine:
    """Runs policies from a ``Registry``; holds the node view, and the policies their state.

    ``always_fold``: keep the node view even when no policy reads it (the test kit shows it).
    """

    def __init__(
        self, registry: Registry, facts: NodeFacts = UNKNOWN_NODE, *, always_fold: bool = False
    ) -> None:
        self.registry = registry
        self.node = NodeState(facts)
        self.always_fold = always_fold
        # Requests evaluated so far: a change means an event arrived (the resync's check).
        self.evaluations = 0
        self._logged_drops: set[tuple[str, str]] = set()
        # The dry-run copies (module docstring): the node view's, and each policy's state.
        self._dry_node: NodeSnapshot | None = None
        self._dry_states: dict[str, tuple[object, ...]] = {}

    @property
    def folds(self) -> bool:
        """Whether requests are folded into the node view (module docstring)."""
        return self.always_fold or self.registry.reads_node

    def needs_payload(self, policy_name: str) -> bool:
        """Whether a request to ``policy_name`` needs its ``Event``'s typed payload: the node
        view folds it in, or the policy reads it (an unknown name is answered 404 unread)."""
        if self.folds:
            return True
        try:
            return self.registry.get(policy_name).payload is Payload.TYPED
        except UnknownPolicyError:
            return False

    def evaluate(self, policy_name: str, event: Event) -> Evaluation:
        policy = self.registry.get(policy_name)
        self.evaluations += 1
        if not event.dry_run:
            return self._evaluate(policy, event)
        # Swap the dry-run copies in, evaluate, keep them, swap the real state back. Nothing
        # awaits in between, so no other request sees the copies.
        real_node, real_state = self.node.snapshot(), policy.snapshot_state()
        fresh = event.name is EventName.SYNCHRONIZE
        if not fresh and self._dry_node is not None:
            self.node.restore(self._dry_node)
        dry_state = None if fresh else self._dry_states.get(policy.name)
        if dry_state is not None:
            policy.restore_state(dry_state)
        try:
            return self._evaluate(policy, event)
        finally:
            self._dry_node = self.node.snapshot()
            self._dry_states[policy.name] = policy.snapshot_state()
            self.node.restore(real_node)
            policy.restore_state(real_state)

    def _evaluate(self, policy: Policy[Any], event: Event) -> Evaluation:
        started = time.perf_counter()
        if self.folds:
            self.node.apply(event)
        if policy.payload is Payload.BODY:
            event = without_payload(event)
        view = self.node.view
        for observe in policy.observers_for(event.name):
            try:
                observe(event, view)
            except Exception:
                log.exception("policy=%s observer failed %s", policy.name, describe(event))
        context = policy.context()
        outputs: list[tuple[str, Decision]] = []
        failures: list[str] = []
        errors: list[str] = []
        for spec in policy.handlers_for(event.name):
            try:
                with_node = spec.with_node
                if with_node is None:
                    decision = spec.call(event, context)
                else:
                    decision = with_node(event, context, view)
            except PolicyError as exc:
                failures.append(spec.name)
                errors.append(f"{spec.name}: {exc}")
                log.info(
                    "policy=%s handler=%s: %s %s", policy.name, spec.name, exc, describe(event)
                )
                continue
            except Exception as exc:
                failures.append(spec.name)
                errors.append(crash_note(spec.name, exc))
                log.exception(
                    "policy=%s handler=%s crashed %s", policy.name, spec.name, describe(event)
                )
                continue
            if decision is not None:
                if decision.errors:
                    failures.append(spec.name)
                    errors.extend(f"{spec.name}: {e}" for e in decision.errors)
                outputs.append((spec.name, decision))
        merged = merge(outputs)
        decision, notes = _apply_failure_policy(policy, context, merged.decision, errors)
        decision, node_notes = self._fit_to_node(policy.name, event, decision)
        decision, event_notes = _fit_to_event(decision, event)
        return Evaluation(
            policy=policy.name,
            event=event,
            decision=decision,
            conflicts=merged.conflicts,
            failed_handlers=tuple(failures),
            duration_s=time.perf_counter() - started,
            notes=(*notes, *node_notes, *event_notes),
        )

    def _fit_to_node(
        self, policy: str, event: Event, decision: Decision
    ) -> tuple[Decision, tuple[str, ...]]:
        """Drop ``unified`` keys the node cannot take: runc would fail the container's creation
        or the whole update (replied or pushed). All of them on cgroup v1, with a reply warning
        each time (the notes returned); on cgroup v2 those whose file the probe did not find in
        the containers' cgroups, logged once per policy and key (keys nobody could check are
        passed on)."""
        facts = self.node.facts
        if not facts.unified_allowed:
            decision, dropped = _without_unified(decision, lambda key: True)
            return decision, tuple(_unified_dropped(keys, where) for where, keys in dropped)
        if facts.cgroup_files is None:
            return decision, ()
        decision, dropped = _without_unified(decision, facts.lacks_cgroup_file)
        for where, keys in dropped:
            for key in keys:
                said = (policy, key)
                if said in self._logged_drops or len(self._logged_drops) >= MAX_LOGGED_DROPS:
                    continue
                self._logged_drops.add(said)
                log.warning(
                    "policy=%s: unified[%s] dropped (%s), and from now on without a word: this "
                    "node's containers have no cgroup file %s, which runc would fail to open %s",
                    policy,
                    key,
                    where,
                    key,
                    describe(event),
                )
        return decision, ()


def _without_unified(
    decision: Decision, lacks: Callable[[str], bool]
) -> tuple[Decision, list[tuple[str, tuple[str, ...]]]]:
    """``decision`` minus the ``unified`` keys ``lacks`` names, in its adjustment, updates and
    pushes (an update left with nothing goes), and which keys went from where."""
    dropped: list[tuple[str, tuple[str, ...]]] = []

    def fit(patch: ResourcePatch, where: str) -> ResourcePatch:
        gone = tuple(sorted(key for key in patch.unified if lacks(key)))
        if not gone:
            return patch
        dropped.append((where, gone))
        kept = {key: value for key, value in patch.unified.items() if key not in gone}
        return amended(patch, unified=kept)

    def fit_all(updates: tuple[ContainerUpdate, ...]) -> tuple[ContainerUpdate, ...]:
        out = []
        for update in updates:
            if update.resources.unified:
                update = amended(update, resources=fit(update.resources, update.container_id))
                if update.resources.is_empty():
                    continue
            out.append(update)
        return tuple(out)

    adjust = decision.adjust
    if adjust is not None and adjust.resources.unified:
        adjust = amended(adjust, resources=fit(adjust.resources, "adjust"))
    update, push = fit_all(decision.update), fit_all(decision.push)
    if not dropped:
        return decision, dropped
    return amended(decision, adjust=adjust, update=update, push=push), dropped


def _unified_dropped(keys: tuple[str, ...], where: str) -> str:
    names = ", ".join(keys)
    return f"unified {names} dropped ({where}): cgroup v1 node, runc refuses unified keys there"


def _fit_to_event(decision: Decision, event: Event) -> tuple[Decision, tuple[str, ...]]:
    """Drop reply parts the runtime cannot act on for this event; the warnings saying so."""
    allowed = REPLY_KEYS[event.name]
    if _fits(decision, allowed):
        return decision, ()
    adjust, update, evict, reject = (
        decision.adjust,
        decision.update,
        decision.evict,
        decision.reject,
    )
    notes: list[str] = []
    if adjust is not None and "adjust" not in allowed:
        if not adjust.is_empty():
            notes.append(f"adjust dropped: {event.name} cannot carry it")
        adjust = None
    if update and "update" not in allowed:
        notes.append(f"update dropped: {event.name} cannot carry it")
        update = ()
    if evict and "evict" not in allowed:
        notes.append(f"evict dropped: {event.name} cannot carry it")
        evict = ()
    if reject is not None and "reject" not in allowed:
        notes.append(f"{event.name} cannot be rejected; reason was: {reject}")
        reject = None
    changed = amended(decision, adjust=adjust, update=update, evict=evict, reject=reject)
    return changed, tuple(notes)


def _fits(decision: Decision, allowed: frozenset[str]) -> bool:
    return (
        (decision.adjust is None or "adjust" in allowed)
        and (not decision.update or "update" in allowed)
        and (not decision.evict or "evict" in allowed)
        and (decision.reject is None or "reject" in allowed)
    )


def _apply_failure_policy(
    policy: Policy[Any], context: Any, decision: Decision, errors: list[str]
) -> tuple[Decision, tuple[str, ...]]:
    """``errors`` holds every handler's errors, prefixed with the handler name: the decision's
    reason (``Fail``), or warnings after the decision's (the notes returned)."""
    if not errors:
        return (amended(decision, errors=()) if decision.errors else decision), ()
    if policy.failure_policy(context) is FailurePolicy.FAIL:
        reason = "; ".join(errors)
        if decision.reject is not None:
            reason = f"{decision.reject}; {reason}"
        return amended(decision, reject=reason, errors=()), ()
    return amended(decision, errors=()), tuple(errors)
