"""One configured webhook at run time: its client, its circuit breaker, one call.

`Webhook.consult` is the whole life of one call: budget check, circuit
breaker, HTTP exchange, reply guard. It returns a checked `Contribution` or
raises `WebhookFailure`; what a failure *means* (Ignore, Fail, shadow) is the
handler's business.
"""

from __future__ import annotations

from dataclasses import dataclass

from bridge.contract.request_body import Payload, envelope
from bridge.webhooks.breaker import CircuitBreaker
from bridge.webhooks.checked import MAX_BYTES, MAX_ENTRIES, CheckedReplies
from bridge.webhooks.client import PolicyClient, decode_reply
from bridge.webhooks.failures import FailureKind, WebhookFailure
from bridge.webhooks.guard import Contribution, Scope, parse_reply
from bridge.webhooks.specs import Mode, WebhookFailurePolicy, WebhookSpec

# Below this there is no point in starting an HTTP exchange.
MIN_CALL_BUDGET_S = 0.002
# Remembered replies per webhook, each at most this big (bridge.webhooks.checked).
MAX_CHECKED, MAX_CHECKED_BYTES = MAX_ENTRIES, MAX_BYTES
# Fields whose check depends on the event's container or the node (bridge.webhooks.value_bounds):
# a reply setting one is checked every time.
TARGET_BOUNDED = frozenset({"linux.oom_score_adj", "linux.resources.pids",
                            "linux.resources.hugepage_limits"})


@dataclass(frozen=True, slots=True)
class CallRequest:
    """Everything one call needs besides the webhook itself."""

    event: str
    uid: str
    runtime: bytes  # the envelope's encoded `runtime` object
    payload: Payload
    scope: Scope
    budget_s: float


class Webhook:
    def __init__(self, spec: WebhookSpec, client: PolicyClient | None = None) -> None:
        self.spec = spec
        self.name = spec.name
        self.shadow = spec.mode is Mode.SHADOW
        self.fails_closed = spec.failure_policy is WebhookFailurePolicy.FAIL
        self.client = client or PolicyClient(spec)
        self.breaker = CircuitBreaker(spec.name, spec.breaker.failure_threshold,
                                      spec.breaker.cool_down_s)
        # Replies already checked, by event and exact bytes (a checked Contribution is
        # read-only). Only replies whose check cannot depend on the node's state are kept:
        # no updates or evictions (those name containers the state cache must know), no
        # value bounded by the event's container or the node (TARGET_BOUNDED).
        self._checked: CheckedReplies[tuple[str, bytes], Contribution] = CheckedReplies(
            MAX_CHECKED, MAX_CHECKED_BYTES)

    async def aclose(self) -> None:
        await self.client.aclose()

    async def consult(self, call: CallRequest) -> Contribution:
        budget_s = call.budget_s
        if budget_s < MIN_CALL_BUDGET_S:
            raise WebhookFailure(FailureKind.BUDGET, f"only {max(budget_s, 0) * 1000:.1f} ms "
                                 "left before the runtime's deadline")
        if not self.breaker.admit():
            raise WebhookFailure(FailureKind.CIRCUIT_OPEN, "circuit open after "
                                 f"{self.breaker.consecutive_failures} consecutive failures")
        body = envelope(call.event, call.uid, call.runtime, int(budget_s * 1000), self.shadow,
                        call.payload)
        answered = False
        try:
            raw = await self.client.post_raw(body, budget_s)
            known = self._checked.get((call.event, raw))
            data = decode_reply(raw) if known is None else None
            answered = True
        except WebhookFailure as failure:
            answered = not failure.kind.is_unavailability
            raise
        finally:
            # Also on cancellation: a call the core had to cancel was too slow.
            self.breaker.record(answered)
        if known is not None:
            return known
        contribution = parse_reply(data, self.name, call.scope)
        if (not contribution.updates and not contribution.evictions
                and not contribution.walked.used & TARGET_BOUNDED):
            self._checked.remember((call.event, raw), raw, contribution)
        return contribution
