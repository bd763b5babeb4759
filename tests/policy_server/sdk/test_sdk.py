"""The SDK: registration by decorator, merging several handlers, conflicts, failures."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from bridge.contract.catalogue import REQUEST_PAYLOAD
from policy_server import (
    Adjustment,
    ContainerUpdate,
    Decision,
    Event,
    EventName,
    Eviction,
    FailurePolicy,
    NodeView,
    Payload,
    Policy,
    PolicyError,
    ResourcePatch,
)
from policy_server.engine.evaluate import Engine
from policy_server.engine.reply import decision_to_reply
from policy_server.exceptions import PolicyLoadError, UnknownPolicyError
from policy_server.sdk.decision_merge import Conflict, merge
from policy_server.sdk.limit_checks import MAX_WARNINGS
from policy_server.sdk.oci import Mount
from policy_server.sdk.registry import Registry
from tests.policy_server.factory import container, envelope, evaluate_json, pod, reply_of

CREATE = EventName.CREATE_CONTAINER


def run(policy: Policy[Any], event: str = "CreateContainer") -> dict[str, Any]:
    registry = Registry()
    registry.add(policy)
    carried = {"pod": pod(), "container": container(), "pods": [pod()],
               "containers": [container()]}
    body = envelope(event, **{k: v for k, v in carried.items() if k in REQUEST_PAYLOAD[event]})
    return reply_of(evaluate_json(Engine(registry), policy.name, body))


def test_decorator_registers_per_event_with_or_without_context() -> None:
    policy = Policy("p", context=lambda: {"value": "ctx"})

    @policy.on(CREATE, "UpdateContainer")
    def one(event: Event) -> Decision:
        return Decision(adjust=Adjustment(env={"ONE": event.name.value}))

    @policy.on(CREATE, name="second")
    def two(event: Event, ctx: dict[str, str]) -> Decision:
        return Decision(adjust=Adjustment(env={"TWO": ctx["value"]}))

    assert [h.name for h in policy.handlers_for(CREATE)] == ["one", "second"]
    assert [h.name for h in policy.handlers_for(EventName.UPDATE_CONTAINER)] == ["one"]
    assert policy.events == {CREATE, EventName.UPDATE_CONTAINER}
    assert callable(one) and one.__name__ == "one"  # the decorator returns the function
    assert run(policy) == {"adjust": {"env": [{"key": "ONE", "value": "CreateContainer"},
                                              {"key": "TWO", "value": "ctx"}]}}


def test_bad_registrations_are_refused() -> None:
    policy = Policy("p")
    with pytest.raises(PolicyLoadError, match="takes 3 positional"):
        policy.on(CREATE)(lambda a, b, c: None)
    with pytest.raises(PolicyLoadError, match="at least one event"):
        policy.on()
    with pytest.raises(ValueError):
        policy.on("CreateContainers")
    with pytest.raises(PolicyLoadError, match="URL path"):
        Policy("Bad Name")
    registry = Registry()
    registry.add(Policy("same"))
    with pytest.raises(PolicyLoadError, match="two policies"):
        registry.add(Policy("same"))
    with pytest.raises(UnknownPolicyError):
        registry.get("other")


def test_merge_reports_conflicts_and_the_later_handler_wins() -> None:
    a = Decision(adjust=Adjustment(env={"K": "a"}, resources=ResourcePatch(cpu_shares=2)))
    b = Decision(adjust=Adjustment(env={"K": "b", "L": "b"}, remove_annotations=("x",)))
    c = Decision(adjust=Adjustment(annotations={"x": "c"},
                                   resources=ResourcePatch(cpu_shares=4, unified={"cpu.u": "1"})))
    merged = merge([("a", a), ("b", b), ("c", c)])
    assert merged.conflicts == (
        Conflict("adjust.env.K", "a", "a", "b", "b"),
        Conflict("adjust.annotations.x", "b", "<removed>", "c", "c"),
        Conflict("adjust.linux.resources.cpu.shares", "a", 2, "c", 4),
    )
    adj = merged.decision.adjust
    assert adj is not None
    assert dict(adj.env) == {"K": "b", "L": "b"}
    assert dict(adj.annotations) == {"x": "c"} and adj.remove_annotations == ()
    assert adj.resources == ResourcePatch(cpu_shares=4, unified={"cpu.u": "1"})
    assert len(merged.decision.warnings) == 3
    assert merged.decision.warnings[0] == (
        "conflict on adjust.env.K: a set 'a', b set 'b'; b wins (later in order)")


def test_merge_updates_evictions_and_rejections() -> None:
    a = Decision(update=(ContainerUpdate("c1", ResourcePatch(cpu_shares=2), True),),
                 evict=(Eviction("c9", "too big"),))
    b = Decision(update=(ContainerUpdate("c1", ResourcePatch(memory_limit=10), False),
                         ContainerUpdate("c2", ResourcePatch(cpu_cpus="1"), True)),
                 evict=(Eviction("c9", "and noisy"),), reject="no")
    merged = merge([("a", a), ("b", b)])
    assert merged.conflicts == ()
    reply = decision_to_reply(merged.decision)
    assert reply == {
        "update": [
            {"container_id": "c1", "linux": {"resources": {"cpu": {"shares": 2},
                                                           "memory": {"limit": 10}}}},
            {"container_id": "c2", "linux": {"resources": {"cpu": {"cpus": "1"}}},
             "ignore_failure": True},
        ],
        "evict": [{"container_id": "c9", "reason": "too big; and noisy"}],
        "reject": {"reason": "b: no"},
    }


def test_adjustment_reply_shape() -> None:
    adj = Adjustment(
        env={"A": "1"}, annotations={"k": "v"},
        mounts=(Mount("/x", "bind", "/host/x", ("rbind", "ro")),),
        resources=ResourcePatch(cpu_quota=-1, memory_limit=5, rdt_class="gold"),
        oom_score_adj=-5, remove_env=("B",), remove_mounts=("/y",),
    )
    assert decision_to_reply(Decision(adjust=adj)) == {"adjust": {
        "env": [{"key": "A", "value": "1"}],
        "annotations": {"k": "v"},
        "mounts": [{"destination": "/x", "type": "bind", "source": "/host/x",
                    "options": ["rbind", "ro"]}],
        "linux": {"resources": {"cpu": {"quota": -1}, "memory": {"limit": 5},
                                "rdt_class": "gold"}, "oom_score_adj": -5},
        "remove": {"env": ["B"], "mounts": ["/y"]},
    }}
    assert decision_to_reply(Decision(adjust=Adjustment())) == {}


def test_policy_error_becomes_a_warning_and_other_handlers_still_apply() -> None:
    policy = Policy("p")

    @policy.on(CREATE)
    def broken(event: Event) -> Decision:
        raise PolicyError("label missing")

    @policy.on(CREATE)
    def fine(event: Event) -> Decision:
        return Decision(adjust=Adjustment(env={"OK": "1"}))

    assert run(policy) == {"adjust": {"env": [{"key": "OK", "value": "1"}]},
                           "warnings": ["broken: label missing"]}


def test_a_crashing_handler_is_logged_and_contained(caplog: pytest.LogCaptureFixture) -> None:
    policy = Policy("p", failure_policy=FailurePolicy.FAIL)

    @policy.on(CREATE)
    def crash(event: Event) -> Decision:
        decisions: dict[str, Decision] = {}
        return decisions["missing"]

    with caplog.at_level(logging.ERROR):
        out = run(policy)
    assert out == {"reject": {"reason": "crash: internal error (KeyError: 'missing')"}}
    assert "Traceback" in caplog.text and "handler=crash crashed" in caplog.text


def test_parts_an_event_cannot_carry_are_dropped_with_a_warning() -> None:
    policy = Policy("p")

    @policy.on(EventName.RUN_POD_SANDBOX, EventName.SYNCHRONIZE, EventName.POST_START_CONTAINER)
    def everything(event: Event) -> Decision:
        return Decision(adjust=Adjustment(env={"A": "1"}), evict=(Eviction("c"),), reject="no",
                        update=(ContainerUpdate("c", ResourcePatch(cpu_shares=2)),))

    assert run(policy, "RunPodSandbox") == {"reject": {"reason": "everything: no"}, "warnings": [
        "adjust dropped: RunPodSandbox cannot carry it",
        "update dropped: RunPodSandbox cannot carry it",
        "evict dropped: RunPodSandbox cannot carry it"]}
    sync = run(policy, "Synchronize")
    assert "update" in sync and "reject" not in sync and "evict" not in sync
    assert sync["warnings"][-1] == "Synchronize cannot be rejected; reason was: everything: no"
    assert set(run(policy, "PostStartContainer")) == {"warnings"}


def test_merged_warnings_are_cut_to_the_contract_and_one_decision_over_it_is_refused() -> None:
    """Each handler's decision is inside the contract's maxItems; the merge of several is cut
    to it, the last kept warning saying how many more went. A handler that builds a decision
    with more raises there, and is treated as any raising handler."""
    policy = Policy("p")

    @policy.on(CREATE)
    def chatty(event: Event) -> Decision:
        return Decision(warnings=tuple(f"a{i}" for i in range(MAX_WARNINGS)))

    @policy.on(CREATE)
    def chattier(event: Event) -> Decision:
        return Decision(warnings=tuple(f"b{i}" for i in range(MAX_WARNINGS)))

    warnings = run(policy)["warnings"]
    assert isinstance(warnings, list) and len(warnings) == MAX_WARNINGS
    assert warnings[:2] == ["a0", "a1"]
    assert warnings[-1] == f"... and {MAX_WARNINGS + 1} more warnings"

    too_many = Policy("p")

    @too_many.on(CREATE)
    def flood(event: Event) -> Decision:
        return Decision(warnings=tuple(f"w{i}" for i in range(MAX_WARNINGS + 1)))

    assert run(too_many)["warnings"] == [
        "flood: internal error (ValueError: Decision.warnings: 101 items are above maxItems "
        "100 (reply contract: warnings))"]


def test_observers_run_before_handlers() -> None:
    seen: list[str] = []
    policy = Policy("p")

    @policy.observe(CREATE)
    def remember(event: Event) -> None:
        seen.append("observer")

    @policy.on(CREATE)
    def handler(event: Event) -> None:
        seen.append("handler")

    run(policy)
    assert seen == ["observer", "handler"]


def test_the_registry_knows_whether_a_policy_reads_the_node_view() -> None:
    """Handlers and observers without ``node`` do not count; a reader added later, or a policy
    that gains a reading observer after it was added, does."""
    registry = Registry()
    assert not registry.reads_node
    plain = Policy("plain")

    @plain.observe(CREATE)
    def remember(event: Event) -> None:
        return None

    @plain.on(CREATE)
    def answer(event: Event) -> None:
        return None

    registry.add(plain)
    assert not plain.reads_node and not registry.reads_node
    later = Policy("later")
    registry.add(later)
    assert not registry.reads_node

    @later.observe(CREATE)
    def look(event: Event, *, node: NodeView) -> None:
        return None

    assert later.reads_node and registry.reads_node
    other = Registry()
    handler = Policy("handler")

    @handler.on(CREATE)
    def place(event: Event, *, node: NodeView) -> None:
        return None

    other.add(handler)
    assert other.reads_node


def test_a_policy_reads_the_typed_payload_unless_it_says_otherwise() -> None:
    assert Policy("x").payload is Payload.TYPED
    assert Policy("x", payload=Payload.BODY).payload is Payload.BODY
    with pytest.raises(ValueError, match="'whole' is not a valid Payload"):
        Policy("x", payload="whole")  # type: ignore[call-overload]  # a str: refused at run time
