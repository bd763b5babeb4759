"""A validating policy for the guest tests: refuses containers of pods annotated
``node-v2.nri-webhook-bridge/refuse`` with the annotation's text as the reason."""

from __future__ import annotations

from policy_server import Decision, Event, EventName, Policy

REFUSE_ANNOTATION = "node-v2.nri-webhook-bridge/refuse"

policy = Policy("node-v2-refuse", description=f"refuse pods annotated {REFUSE_ANNOTATION}")


@policy.on(EventName.CREATE_CONTAINER)
def refuse(event: Event) -> Decision | None:
    reason = event.pod.annotations.get(REFUSE_ANNOTATION) if event.pod else None
    return Decision(reject=reason) if reason else None
