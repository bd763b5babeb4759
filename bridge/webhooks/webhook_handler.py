"""The webhook handler: NRI events in, webhook calls in order, one merged NRI answer out.

Per event: pick the webhooks subscribed to it whose selectors match the pod
(a miss costs no HTTP call), convert the payload once, then call them one
after another. Each call gets `min(time left before ctx.deadline - margin,
webhook timeout)`; a later webhook gets what the earlier ones left.

Outcomes (decisions documented in docs/webhooks.md):
- success: the contribution is merged (bridge.webhooks.reply_merge);
- failure (transport, reply, allow list, values, conflict, open circuit):
  Ignore → that webhook's contribution is dropped, logged and counted;
  Fail → EventRejected naming the webhook and the reason;
- `reject` in enforce mode fails the operation whatever the failure policy
  (it is the policy's explicit decision);
- shadow mode: call with dry_run, log the would-be change or failure, apply nothing;
- a contribution that sets a leaf the connected runtime does not apply (its NRI version does
  not know it, docs/protocol.md#what-each-nri-version-added, or the runtime ignores it on that
  route: the field table, bridge.contract.runtime_effects) is still merged and answered in
  time, with a warning naming the runtime and `dropped_fields_total` per leaf;
- a field that would crash the connected runtime (bridge.contract.runtime_hazards: an added
  sysctl on NRI v0.11.x) is taken out of the contribution before the merge
  (bridge.webhooks.crash_guard), so the container is created without it, with a warning naming
  the webhook and the runtime and `dropped_fields_total` per field.

What is fixed for a connection is derived when the handler is configured (`configure`: the
runtime's hazards, the leaves it ignores per route, the envelope's encoded `runtime` object:
bridge.contract.capabilities.ConnectedRuntime); an event looks them up, and the dropped-field
check reads the leaf paths of the guard's one walk over the reply (bridge.webhooks.reply_walk).
Latencies (`latency_ms`, the duration histograms) are measured with `time.perf_counter`, the
event loop's clock only sets budgets against the runtime's deadline.

Synchronize is different: a webhook gets its own `sync_timeout`, not the
runtime's budget; if that runs past the runtime's deadline, the core answers
in time and delivers our updates through UpdateContainers afterwards.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from prometheus_client import Counter, Histogram

from bridge.contract.adjustment import nri_adjustment_to_json
from bridge.contract.capabilities import ConnectedRuntime, connected
from bridge.contract.catalogue import EVENTS_BY_RPC, SPEC_OF, NriEvent
from bridge.contract.codec import log_subject
from bridge.contract.convert import to_json
from bridge.contract.nri_version import format_version
from bridge.contract.request_body import PayloadBuilder, encode
from bridge.contract.runtime_hazards import Hazard
from bridge.metrics import BridgeMetrics
from bridge.nri.event_call import (
    NO_CHANGE,
    Answer,
    EventCall,
    EventRejected,
    RuntimeInfo,
)
from bridge.process_setup.gc_pause import paused_gc
from bridge.proto.nri import api_pb2 as api
from bridge.webhooks.crash_guard import without_hazards
from bridge.webhooks.failures import FailureKind, WebhookFailure
from bridge.webhooks.guard import Contribution, Lookup, Scope
from bridge.webhooks.log_text import clip, truncated_json
from bridge.webhooks.node_cpusets import UNKNOWN as UNKNOWN_CPUS
from bridge.webhooks.node_cpusets import NodeCpus
from bridge.webhooks.node_hugepages import NodeSettings
from bridge.webhooks.reply_merge import Merger
from bridge.webhooks.specs import WebhookSpec
from bridge.webhooks.value_bounds import ReplyTarget
from bridge.webhooks.webhook import CallRequest, Webhook

log = logging.getLogger(__name__)

CALL_MARGIN_S = 0.025  # kept back from each call: merging, writing the answer, loop lag
LOG_VALUE_CHARS = 2048  # cap for replies/diffs in log lines
# Everything a policy wrote that one log line carries (reasons, warnings, shadow diffs,
# evictions), in bytes as escaped in a JSON line: a 900 KB reply logs at most this.
LOG_POLICY_BYTES = 3072
_POLICY_TEXT = ("reason", "warnings", "would_adjust", "would_update", "would_reject",
                "would_conflict", "evict")


def _unknown_cpus() -> NodeCpus:
    return UNKNOWN_CPUS


def _bounded(extra: dict[str, Any]) -> dict[str, Any]:
    """`extra` with the policy's text cut to share LOG_POLICY_BYTES (nothing
    from a reply may flood the log: docs/operations.md#hostile-policy-replies-and-security)."""
    present = [key for key in _POLICY_TEXT if key in extra]
    if present:
        share = min(LOG_VALUE_CHARS, LOG_POLICY_BYTES // len(present))
        for key in present:
            extra[key] = clip(str(extra[key]), share)
    return extra


class WebhookHandler:
    """The EventHandler that consults webhooks. `lookup` finds an update or eviction target
    with its pod (the plugin's state cache), for the reply guard; without it,
    `knows_container` answers whether the target exists and nothing else is known of it.
    `node` says where the node's hugepages, CPUs and memory nodes are read
    (bridge.webhooks.node_hugepages, bridge.webhooks.node_cpusets)."""

    def __init__(self, specs: Sequence[WebhookSpec], metrics: BridgeMetrics | None = None,
                 webhooks: Sequence[Webhook] | None = None,
                 knows_container: Callable[[str], bool] = lambda _: False,
                 lookup: Lookup | None = None, node: NodeSettings | None = None) -> None:
        self.webhooks = list(webhooks) if webhooks is not None else [Webhook(s) for s in specs]
        self.metrics = metrics or BridgeMetrics()
        self.knows_container = knows_container
        self.lookup = lookup
        self.hugepages = (node or NodeSettings()).hugepages
        # Without a `node` (a handler built by hand) the node's CPUs are not known: the
        # configured bridge always passes its config's (default /sys).
        self.node_cpus = node.node_cpus if node is not None else _unknown_cpus
        self._payloads = PayloadBuilder()
        # What is fixed per connection, derived at configure(): the RuntimeInfo it was derived
        # from, the table's answers for that runtime, the encoded envelope `runtime` object.
        self._runtime: tuple[RuntimeInfo, ConnectedRuntime, bytes] | None = None
        self._routes: dict[str, tuple[Webhook, ...]] = {}
        # Labelled metric children, looked up once: labels() takes a lock and builds a key
        # on every call, four calls per event (docs/performance.md#numbers-behind-the-code).
        # Bounded: events x webhooks x outcomes.
        self._event_metrics: dict[str, tuple[Counter, Histogram]] = {}
        self._call_metrics: dict[tuple[str, str, str], tuple[Counter, Histogram]] = {}
        for hook in self.webhooks:
            for event in hook.spec.events:
                self._routes[event] = (*self._routes.get(event, ()), hook)
            self.metrics.add_circuit(hook.name, _state_reader(hook))
            self.metrics.add_retries(hook.name, _retries_reader(hook))

    def wanted_events(self) -> frozenset[NriEvent]:
        return frozenset(EVENTS_BY_RPC[name] for name in self._routes if name in EVENTS_BY_RPC)

    async def configure(self, runtime: RuntimeInfo) -> None:
        self._connection(runtime)

    async def handle(self, call: EventCall) -> Answer:
        """One event: the matching webhooks in order, one merged answer (or a rejection)."""
        try:
            if call.event is None:
                updates = await self._synchronize(call)
                return Answer(api.SynchronizeResponse(update=updates)) if updates else NO_CHANGE
            req = call.request
            creating = req.container.id if isinstance(req, api.CreateContainerRequest) else None
            merger = await self._event(call, creating)
        except EventRejected as exc:
            return Answer(reject=exc.reason)
        if merger is None:
            return NO_CHANGE
        # The changes the event's response carries (the catalogue, from api.proto); for pod
        # events, post-events, removals and validation there are none: a reply can only reject.
        spec = SPEC_OF[call.event]
        changes: dict[str, Any] = {}
        if merger.adjust is not None and "adjust" in spec.changes:
            changes["adjust"] = merger.adjust
        if merger.updates and spec.carries_update:
            changes["update"] = merger.update_list()
        return Answer(spec.response_type(**changes)) if changes else NO_CHANGE

    async def aclose(self) -> None:
        for hook in self.webhooks:
            await hook.aclose()

    def _connection(self, runtime: RuntimeInfo) -> tuple[RuntimeInfo, ConnectedRuntime, bytes]:
        """What is fixed for the connection `runtime` came with: derived at configure(), again
        only when a call brings another RuntimeInfo (a new connection; a handler never
        configured)."""
        cached = self._runtime
        if cached is None or cached[0] is not runtime:
            known = connected(runtime.name, runtime.version, runtime.nri_version)
            cached = self._runtime = (runtime, known, encode(dict(known.envelope)))
        return cached

    # -- the event path ---------------------------------------------------------------

    async def _event(self, call: EventCall, creating: str | None) -> Merger | None:
        req = call.request
        assert req is not None
        hooks = self._routes.get(call.name)
        if not hooks:
            return None
        pod = getattr(req, "pod") if req.HasField("pod") else None  # noqa: B009 - any event
        selected = [h for h in hooks if h.spec.selector.matches(pod)]
        if not selected:
            return None
        loop = asyncio.get_running_loop()
        started = time.perf_counter()
        _, known, runtime_json = self._connection(call.runtime)
        payload = self._payloads.event(call.name, req)
        who = {"event": call.name, "uid": call.uid, **log_subject(req)}
        target = ReplyTarget(_container_of(req), pod)
        merger = Merger()
        try:
            for hook in selected:
                scope = Scope(call.name, hook.spec.allow, self.knows_container, creating,
                              target, self.lookup, hook.spec.selector, self.hugepages,
                              self.node_cpus)
                budget = min(call.deadline - loop.time() - CALL_MARGIN_S, hook.spec.timeout_s)
                request = CallRequest(call.name, call.uid, runtime_json, payload, scope, budget)
                await self._call(hook, request, merger, who, known)
        finally:
            count, duration = self._event_children(call.name)
            count.inc()
            duration.observe(time.perf_counter() - started)
        return merger

    async def _call(self, hook: Webhook, call: CallRequest, merger: Merger,
                    who: dict[str, str], runtime: ConnectedRuntime) -> None:
        """One webhook call, its merge, its log line and its metrics."""
        started = time.perf_counter()
        extra: dict[str, Any] = {**who, "webhook": hook.name,
                                 "budget_ms": round(max(call.budget_s, 0) * 1000)}
        try:
            asked = await hook.consult(call)
            # Before anything else sees it: a field that would crash the runtime never reaches
            # the merge, not even as a shadow webhook's would-be change.
            contribution, hazards = without_hazards(asked, runtime.hazards)
            if hook.shadow:
                self._shadow(merger, contribution, extra)
            elif contribution.reject is None:
                merger.add(contribution)
        except WebhookFailure as failure:
            self._record(hook, call.event, failure.kind.value, time.perf_counter() - started,
                         extra)
            self._failed(hook, call.event, failure, extra)
            return
        outcome = ("rejected" if contribution.reject is not None
                   else "ok" if asked.changes_something else "no_change")
        self._record(hook, call.event, "shadow_" + outcome if hook.shadow else outcome,
                     time.perf_counter() - started, extra)
        self._report(hook, contribution, extra)
        if contribution.reject is None and not hook.shadow:
            # After the call's own line, so the warning follows the call it is about.
            self._dropped(hook, call.event, contribution, runtime, extra)
            self._crashing(hook, call.event, hazards, runtime, extra)
        if contribution.reject is not None and not hook.shadow:
            self.metrics.rejections.labels(call.event, hook.name).inc()
            raise EventRejected(f'webhook "{hook.name}" rejected {call.event}: '
                                f"{contribution.reject}")

    def _dropped(self, hook: Webhook, event: str, c: Contribution, runtime: ConnectedRuntime,
                 extra: dict[str, Any]) -> None:
        """Warn about and count the leaves the connected runtime would silently ignore (the
        field table: its NRI version, and what it applies on each route), from the leaf paths
        the guard's walk found."""
        if not c.changes_something:
            return
        walk = c.walked
        dropped = runtime.dropped(walk.adjust_leaves, walk.update_leaves)
        if not dropped:
            return
        for path in dropped:
            self.metrics.dropped_fields.labels(event, hook.name, path).inc()
        known = runtime.runtime
        log.warning("the runtime will ignore fields this policy set (%s does not apply them)",
                    known.label, extra={**extra, "fields": dropped,
                                        "runtime": f"{known.name} {known.version}",
                                        "nri_version": format_version(known.nri)})

    def _crashing(self, hook: Webhook, event: str, hazards: tuple[Hazard, ...],
                  runtime: ConnectedRuntime, extra: dict[str, Any]) -> None:
        """Warn about and count the fields taken out because they would crash the runtime."""
        if not hazards:
            return
        fields = [row.path for row in hazards]
        for path in fields:
            self.metrics.dropped_fields.labels(event, hook.name, path).inc()
        known = runtime.runtime
        nri = format_version(known.nri)
        log.warning(
            f'dropped {", ".join(fields)} from webhook "{hook.name}": it would crash the '
            f"runtime ({known.name} {known.version}, NRI {nri})",
            extra={**extra, "fields": fields, "runtime": f"{known.name} {known.version}",
                   "nri_version": nri,
                   "why": "; ".join(f"{row.panic} in {row.upstream}" for row in hazards)})

    def _record(self, hook: Webhook, event: str, outcome: str, elapsed_s: float,
                extra: dict[str, Any]) -> None:
        extra["outcome"] = outcome
        extra["latency_ms"] = round(elapsed_s * 1000, 3)
        key = (event, hook.name, outcome)
        children = self._call_metrics.get(key)
        if children is None:
            children = self._call_metrics[key] = (
                self.metrics.requests.labels(event, hook.name, outcome),
                self.metrics.duration.labels(event, hook.name))
        children[0].inc()
        children[1].observe(elapsed_s)

    def _event_children(self, event: str) -> tuple[Counter, Histogram]:
        children = self._event_metrics.get(event)
        if children is None:
            children = self._event_metrics[event] = (self.metrics.events.labels(event),
                                                     self.metrics.event_duration.labels(event))
        return children

    def _failed(self, hook: Webhook, event: str, failure: WebhookFailure,
                extra: dict[str, Any]) -> None:
        extra["reason"] = failure.reason
        if failure.kind is FailureKind.TIMEOUT or failure.kind is FailureKind.BUDGET:
            self.metrics.timeouts.labels(event, hook.name).inc()
        if failure.kind is FailureKind.CONFLICT:
            self.metrics.conflicts.labels(event, hook.name).inc()
        if hook.shadow:
            extra["action"] = "none (shadow)"
            log.warning("webhook call failed", extra=_bounded(extra))
            return
        if hook.fails_closed:
            extra["action"] = "fail the operation"
            log.warning("webhook call failed", extra=_bounded(extra))
            self.metrics.rejections.labels(event, hook.name).inc()
            # The reason can quote the reply (a key, a value): bounded for the runtime too.
            raise EventRejected(f'webhook "{hook.name}" failed ({failure.kind.value}): '
                                f"{clip(failure.reason, LOG_VALUE_CHARS)}")
        extra["action"] = "ignore its contribution"
        self.metrics.fail_open.labels(event, hook.name).inc()
        log.warning("webhook call failed", extra=_bounded(extra))

    def _shadow(self, merger: Merger, c: Contribution, extra: dict[str, Any]) -> None:
        """Log what the webhook would have changed; apply nothing."""
        if c.adjust is not None:
            extra["would_adjust"] = truncated_json(nri_adjustment_to_json(c.adjust),
                                                   LOG_VALUE_CHARS)
        if c.updates:
            extra["would_update"] = truncated_json([to_json(u) for u in c.updates],
                                                   LOG_VALUE_CHARS)
        if c.reject is not None:
            extra["would_reject"] = c.reject
        try:
            merger.check(c)
        except WebhookFailure as conflict:
            extra["would_conflict"] = conflict.reason

    def _report(self, hook: Webhook, c: Contribution, extra: dict[str, Any]) -> None:
        if c.reject is not None:
            extra["reason"] = c.reject
        if c.warnings:
            extra["warnings"] = truncated_json(list(c.warnings), LOG_VALUE_CHARS)
        level = logging.WARNING if c.warnings else logging.INFO
        log.log(level, "shadow webhook call" if hook.shadow else "webhook call",
                extra=_bounded(extra))
        if c.evictions:  # one line for all of them: a reply may hold thousands
            evict = [[e.container_id[:80], e.reason[:200]] for e in c.evictions[:100]]
            log.info("eviction requested (NRI runtimes drop evictions; not forwarded)",
                     extra=_bounded({**extra, "evictions": len(c.evictions),
                                     "evict": truncated_json(evict, LOG_VALUE_CHARS)}))

    # -- Synchronize ------------------------------------------------------------------

    async def _synchronize(self, call: EventCall) -> list[api.ContainerUpdate]:
        pods, containers = call.pods, call.containers
        hooks = self._routes.get("Synchronize")
        if not hooks:
            return []
        pod_of = {p.id: p for p in pods}
        known = {c.id: (c, pod_of.get(c.pod_sandbox_id)) for c in containers}
        merger = Merger()
        who = {"event": "Synchronize", "uid": call.uid}
        _, runtime, runtime_json = self._connection(call.runtime)
        # The whole node: the payload and the replies are built with the collector paused
        # until the calls are done (bridge.process_setup.gc_pause).
        with paused_gc():
            for hook in hooks:
                # Called even when nothing is chosen: "no pods" is the node's state too, and a
                # stateful policy (cpu-pools) must learn it before it hands out CPUs.
                chosen_pods, chosen = _select(hook, pods, containers)
                scope = Scope("Synchronize", hook.spec.allow, known.__contains__,
                              lookup=known.get, selector=hook.spec.selector,
                              hugepages=self.hugepages, node_cpus=self.node_cpus)
                request = CallRequest("Synchronize", call.uid, runtime_json,
                                      self._payloads.sync(chosen_pods, chosen), scope,
                                      hook.spec.sync_timeout_s)
                await self._call(hook, request, merger, {**who, "pods": str(len(chosen_pods)),
                                                         "containers": str(len(chosen))},
                                 runtime)
        self._event_children("Synchronize")[0].inc()
        return merger.update_list()


def _select(hook: Webhook, pods: Sequence[api.PodSandbox], containers: Sequence[api.Container],
            ) -> tuple[list[api.PodSandbox], list[api.Container]]:
    """Synchronize: the pods a webhook's selector matches, and their containers."""
    selector = hook.spec.selector
    if selector.matches_all:
        return list(pods), list(containers)
    chosen = [p for p in pods if selector.matches(p)]
    ids = {p.id for p in chosen}
    return chosen, [c for c in containers if c.pod_sandbox_id in ids]


def _container_of(req: Any) -> api.Container | None:
    """The event's container, for events that carry one."""
    if "container" in req.DESCRIPTOR.fields_by_name and req.HasField("container"):
        container = req.container
        assert isinstance(container, api.Container)
        return container
    return None


def _state_reader(hook: Webhook) -> Callable[[], int]:
    return lambda: hook.breaker.state.value



def _retries_reader(hook: Webhook) -> Callable[[], int]:
    return lambda: hook.client.retries
