"""benchmarks/bench_cel_floor.py: body-only policies that pay parts of a CEL policy's work.

Owns four policies that answer a CreateContainer with no change: ``body-noop`` does nothing (the
route's cost for a body-only policy); ``cel-true`` evaluates the constant CEL program ``true``
with nothing bound (one call into cel-cpp); ``cel-true-bound`` evaluates it with the read part
of benchmarks/cel/five-rules.yaml bound, decoded once at import (the call with a binding);
``cel-true-decoded`` decodes that read part from each request body first, as the ``cel`` policy
does. Their cost over ``body-noop`` is what the ``cel`` policy pays before its rules run.
"""

from __future__ import annotations

from pathlib import Path

from policy_server import Decision, Event, EventName, Payload, Policy
from policy_server.policies.cel.compiler import eval_env
from policy_server.policies.cel.policy_set import PolicySet

ROOT = Path(__file__).resolve().parents[2]
_VIEW = PolicySet(ROOT / "benchmarks/cel/five-rules.yaml").by_event[EventName.CREATE_CONTAINER].view
_TRUE = eval_env().compile("true", disable_check=True)
_BOUND = _VIEW.decode((ROOT / "schemas/webhook/examples/CreateContainer.request.json").read_bytes())

body_noop = Policy("body-noop", payload=Payload.BODY)
cel_true = Policy("cel-true", payload=Payload.BODY)
cel_true_bound = Policy("cel-true-bound", payload=Payload.BODY)
cel_true_decoded = Policy("cel-true-decoded", payload=Payload.BODY)


@body_noop.on(EventName.CREATE_CONTAINER)
def nothing(event: Event) -> Decision | None:
    return None


@cel_true.on(EventName.CREATE_CONTAINER)
def true_alone(event: Event) -> Decision | None:
    assert _TRUE.eval().plain_value() is True
    return None


@cel_true_bound.on(EventName.CREATE_CONTAINER)
def true_bound(event: Event) -> Decision | None:
    assert _TRUE.eval(data=_BOUND).plain_value() is True
    return None


@cel_true_decoded.on(EventName.CREATE_CONTAINER)
def true_decoded(event: Event) -> Decision | None:
    assert _TRUE.eval(data=_VIEW.decode(event.body)).plain_value() is True
    return None
