"""``cel``: node policies without code, written in CEL and shaped like Kubernetes'
ValidatingAdmissionPolicy / MutatingAdmissionPolicy (docs/policies/cel.md).

Owns the built-in's face: ``build(settings)`` reads ``--policy cel=PATH`` (a file of one or more
``NodePolicy`` documents, or a directory of them), compiles and type-checks every expression (a bad
one is a ``PolicyLoadError``: exit 2), and serves every event of the catalogue with one handler
that runs the NodePolicies in force (``program``: their programs joined into one evaluation, each
alone where that fails) and merges their decisions by the SDK's per-key rules; a background task
hot-reloads the files and ``paramsFile``s (``policy_set``), keeping the last good set; the counts
per NodePolicy and validation are on the state page and, through ``Policy.counters``, on
``/metrics`` (``tally``). Package layout: ``node_policy_doc`` (format), ``schema_types`` (JSON
Schema -> CEL types), ``library`` (Kubernetes functions), ``compiler``, ``references`` (what an
expression reads), ``request_view`` (decoding only that), ``policy_program`` (a policy as one
program), ``program`` (evaluation), ``json_patch``, ``policy_set`` (reload), ``tally``. Imports
only the SDK's face. Must not do I/O in the handler.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from policy_server import (
    ConfigStatus,
    CounterSample,
    Decision,
    Event,
    EventName,
    FailurePolicy,
    Payload,
    Policy,
    PolicyHost,
    ReloadResult,
    merge,
)
from policy_server.policies.cel.policy_set import PolicySet
from policy_server.policies.cel.program import evaluate_all
from policy_server.policies.policy_config import PolicySettings

NAME = "cel"
DESCRIPTION = "NodePolicies in CEL (ValidatingAdmissionPolicy / MutatingAdmissionPolicy-like)"
READS_OWN_CONFIG = True


def _unnamed(name: str, decision: Decision) -> Decision:
    if decision.reject is None:
        return decision
    return dataclasses.replace(decision, reject=decision.reject.removeprefix(f"{name}: "))


def build(settings: PolicySettings) -> Policy[PolicySet]:
    policies = PolicySet(settings.path)
    # A bug in here (not an expression's error, which follows the NodePolicy's own
    # failurePolicy) rejects rather than lets a container by unchecked.
    policy = Policy(NAME, context=lambda: policies, description=DESCRIPTION,
                    failure_policy=FailurePolicy.FAIL, payload=Payload.BODY)

    @policy.on(*EventName, name="node-policies")
    def node_policies(event: Event, policies: PolicySet) -> Decision | None:
        in_force = policies.by_event.get(event.name)
        if in_force is None:
            return None
        outputs = evaluate_all(in_force, event.name, event.body, policies.tally)
        if not outputs:
            return None
        if len(outputs) == 1:
            return outputs[0][1]
        # merge names each rejecting policy itself: its reason without the name it starts with.
        return merge((name, _unnamed(name, decision)) for name, decision in outputs).decision

    @policy.background
    async def reload(host: PolicyHost) -> None:
        while not await host.stopped(host.poll_interval_s):
            result = policies.poll()
            if result is not ReloadResult.UNCHANGED:
                await host.config_polled(result, policies.status())

    @policy.config_status
    def status() -> ConfigStatus:
        return policies.status()

    @policy.describe
    def state() -> Mapping[str, Any]:
        return {
            **policies.status().to_json(),
            "policies": [{"name": p.name, "file": str(p.file), "events": sorted(p.events)}
                         for p in policies.current],
            "counts": policies.tally.counts(),
        }

    @policy.counters
    def counters() -> Iterable[CounterSample]:
        return policies.tally.samples()

    return policy
