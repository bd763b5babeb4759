"""Pure parts: selector semantics, the breaker's state table, value checks, merge claims."""

from __future__ import annotations

import pytest

from bridge.contract import adjustment_fields as fields
from bridge.proto.nri import api_pb2 as api
from bridge.webhooks.breaker import CircuitBreaker, CircuitState
from bridge.webhooks.failures import WebhookFailure
from bridge.webhooks.guard import Contribution
from bridge.webhooks.kinds import ALL_KINDS
from bridge.webhooks.reply_merge import Merger
from bridge.webhooks.reply_walk import ReplyWalk
from bridge.webhooks.selector import Operator, Requirement, Selector
from bridge.webhooks.values import ValueProblem, check_cpuset


def _pod(ns: str = "default", labels: dict[str, str] | None = None,
         annotations: dict[str, str] | None = None, handler: str = "") -> api.PodSandbox:
    return api.PodSandbox(namespace=ns, labels=labels or {}, annotations=annotations or {},
                          runtime_handler=handler)


@pytest.mark.parametrize(("req", "labels", "expected"), [
    (Requirement("a", Operator.IN, frozenset({"1", "2"})), {"a": "2"}, True),
    (Requirement("a", Operator.IN, frozenset({"1"})), {}, False),
    (Requirement("a", Operator.NOT_IN, frozenset({"1"})), {}, True),
    (Requirement("a", Operator.NOT_IN, frozenset({"1"})), {"a": "1"}, False),
    (Requirement("a", Operator.EXISTS), {"a": ""}, True),
    (Requirement("a", Operator.DOES_NOT_EXIST), {"a": ""}, False),
])
def test_label_requirements_follow_kubernetes(req: Requirement, labels: dict[str, str],
                                              expected: bool) -> None:
    assert Selector(labels=(req,)).matches(_pod(labels=labels)) is expected


def test_selector_parts_are_anded() -> None:
    sel = Selector(namespaces=frozenset({"a", "b"}), runtime_handlers=frozenset({"kata"}),
                   annotations=(("x", None), ("y", frozenset({"1"}))))
    good = _pod("a", annotations={"x": "anything", "y": "1"}, handler="kata")
    assert sel.matches(good)
    assert not sel.matches(_pod("c", annotations={"x": "", "y": "1"}, handler="kata"))
    assert not sel.matches(_pod("a", annotations={"y": "1"}, handler="kata"))
    assert not sel.matches(_pod("a", annotations={"x": "", "y": "2"}, handler="kata"))
    assert not sel.matches(_pod("a", annotations={"x": "", "y": "1"}, handler="runc"))
    assert not sel.matches(None)
    assert Selector().matches(None)


def _state(breaker: CircuitBreaker) -> CircuitState:
    """The breaker's state, read through a call: mypy would keep `breaker.state` narrowed by one
    assert across the record() calls that change it."""
    return breaker.state


def test_breaker_state_table() -> None:
    now = [0.0]
    breaker = CircuitBreaker("p", failure_threshold=2, cool_down_s=10.0, clock=lambda: now[0])
    assert breaker.admit()
    breaker.record(False)
    assert _state(breaker) is CircuitState.CLOSED
    breaker.record(True)  # success resets the count
    breaker.record(False)
    assert _state(breaker) is CircuitState.CLOSED
    breaker.record(False)
    assert _state(breaker) is CircuitState.OPEN and not breaker.admit()
    now[0] = 10.0
    assert breaker.admit() and _state(breaker) is CircuitState.HALF_OPEN
    assert not breaker.admit()  # one probe at a time
    breaker.record(False)
    assert _state(breaker) is CircuitState.OPEN and not breaker.admit()
    now[0] = 20.0
    assert breaker.admit()
    breaker.record(True)
    assert _state(breaker) is CircuitState.CLOSED and breaker.admit()


@pytest.mark.parametrize("text", ["0", "0-3", "0-3,8", "1,3,5-7", "65535"])
def test_good_cpusets(text: str) -> None:
    check_cpuset(text, "cpus")


@pytest.mark.parametrize("text", ["", "a", "0-", "-1", "3-1", "0,,1", "0 - 3", "1,", "65536"])
def test_bad_cpusets(text: str) -> None:
    with pytest.raises(ValueProblem):
        check_cpuset(text, "cpus")


def test_every_adjustment_field_has_a_kind() -> None:
    """A field added to the API must be mapped consciously (unmapped = refused by name)."""
    tables = ((api.ContainerAdjustment, fields.ADJUSTMENT_FIELDS),
              (api.LinuxContainerAdjustment, fields.LINUX_FIELDS),
              (api.LinuxResources, fields.RESOURCE_FIELDS))
    for message, table in tables:
        for fd in message.DESCRIPTOR.fields:
            assert fd.name in table, fd.full_name
            rule = table[fd.name]
            if fd.name in ("linux", "resources"):
                assert rule.owner is fields.Owner.WALKED
            else:
                assert rule.kind in ALL_KINDS
                if rule.key:
                    assert fd.message_type is not None, fd.full_name
                    assert rule.key in fd.message_type.fields_by_name
    adj = api.ContainerAdjustment(mounts=[api.Mount(destination="/x")])
    adj.linux.resources.devices.add(allow=True)
    adj.linux.resources.cpu.shares.value = 2
    assert ReplyWalk().adjustment(adj).kinds == {"mounts", "devices", "resources"}


def test_merge_claims_and_conflicts() -> None:
    a = Contribution("a", adjust=api.ContainerAdjustment(annotations={"k": "1"}))
    b = Contribution("b", adjust=api.ContainerAdjustment(annotations={"-k": ""}))
    c = Contribution("c", adjust=api.ContainerAdjustment(annotations={"other": "1"},
                                                         hooks=api.Hooks()))
    merger = Merger()
    merger.add(a)
    with pytest.raises(WebhookFailure, match='webhooks "a" and "b" both tried to set '
                       "annotations 'k'"):
        merger.add(b)  # removing what an earlier webhook set is a conflict too
    merger.add(c)
    assert merger.adjust is not None and dict(merger.adjust.annotations) == {"k": "1", "other": "1"}
    replace = api.ContainerAdjustment(env=[api.KeyValue(key="-X"), api.KeyValue(key="X",
                                                                               value="2")])
    Merger().add(Contribution("d", adjust=replace))  # remove + add in one reply = replace


def test_payload_builder_reuses_a_pod_until_it_changes() -> None:
    import json

    from bridge.contract.request_body import PayloadBuilder, envelope

    builder = PayloadBuilder(pod_cache_size=2)
    pod = api.PodSandbox(id="p1", name="a", namespace="ns", labels={"x": "1"})
    first = builder.pod(pod)
    assert builder.pod(pod) is first
    pod.labels["x"] = "2"
    assert json.loads(builder.pod(pod))["labels"] == {"x": "2"}
    for i in range(3):
        builder.pod(api.PodSandbox(id=f"other-{i}"))
    assert len(builder._pods) == 2
    req = api.CreateContainerRequest(pod=pod, container=api.Container(id="c1", name="app"))
    runtime = b'{"name":"containerd","version":"2.1.9"}'
    doc = json.loads(envelope("CreateContainer", "u1", runtime, 250, True,
                              builder.event("CreateContainer", req)))
    assert doc == {"api_version": "nri-webhook-bridge/v1", "uid": "u1",
                   "event": "CreateContainer",
                   "runtime": {"name": "containerd", "version": "2.1.9"}, "budget_ms": 250,
                   "dry_run": True, "pod": {"id": "p1", "name": "a", "namespace": "ns",
                                            "labels": {"x": "2"}},
                   "container": {"id": "c1", "name": "app"}}
