"""A webhook remembers the replies it has already checked, and only those whose check cannot
depend on the node's state: the same bytes for the same event give the same Contribution."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.proto.nri import api_pb2 as api
from bridge.webhooks import webhook as webhook_module
from bridge.webhooks.failures import FailureKind, WebhookFailure
from bridge.webhooks.guard import Scope, parse_reply
from bridge.webhooks.kinds import DEFAULT_ALLOW
from bridge.webhooks.value_bounds import ReplyTarget
from bridge.webhooks.webhook import CallRequest, Webhook
from tests.bridge.webhooks.helpers import spec
from tests.bridge.webhooks.policy_double import Reply, Seen, policy_double

ENV = {"adjust": {"env": [{"key": "A", "value": "1"}]}}


def call(event: str, known: set[str] | None = None) -> CallRequest:
    known = known if known is not None else set()
    scope = Scope(event, DEFAULT_ALLOW, known.__contains__, "new-container")
    return CallRequest(event, "uid", b'{"name":"containerd","version":"2.1.9"}', {}, scope, 1.0)


async def test_the_same_reply_is_checked_once_and_equals_a_fresh_check() -> None:
    async with policy_double() as double:
        route = double.route("/v1/policy", Reply(json=ENV))
        hook = Webhook(spec(sock=double.sock))
        first = await hook.consult(call("CreateContainer"))
        second = await hook.consult(call("CreateContainer"))
        await hook.aclose()
    assert len(route.calls) == 2  # the policy is still asked every time
    assert second is first
    assert first == parse_reply(ENV, hook.name, call("CreateContainer").scope)


async def test_the_event_is_part_of_the_key() -> None:
    async with policy_double() as double:
        double.route("/v1/policy", Reply(json=ENV))
        hook = Webhook(spec(sock=double.sock))
        assert (await hook.consult(call("CreateContainer"))).adjust is not None
        with pytest.raises(WebhookFailure) as failure:  # adjust means nothing for StartContainer
            await hook.consult(call("StartContainer"))
        await hook.aclose()
    assert failure.value.kind is FailureKind.SCHEMA


async def test_an_invalid_reply_is_refused_every_time() -> None:
    bad = {"adjust": {"linux": {"resources": {"cpu": {"shares": 1}}}}}
    async with policy_double() as double:
        double.route("/v1/policy", Reply(json=bad))
        hook = Webhook(spec(sock=double.sock, circuit_breaker={"failure_threshold": 100}))
        for _ in range(2):
            with pytest.raises(WebhookFailure) as failure:
                await hook.consult(call("CreateContainer"))
            assert failure.value.kind is FailureKind.INVALID
        await hook.aclose()


async def test_updates_are_checked_against_the_state_every_time() -> None:
    update = {"update": [{"container_id": "c1", "linux": {"resources": {"cpu": {"shares": 10}}}}]}
    known = {"c1"}
    async with policy_double() as double:
        double.route("/v1/policy", Reply(json=update))
        hook = Webhook(spec(sock=double.sock))
        assert len((await hook.consult(call("CreateContainer", known))).updates) == 1
        known.clear()  # the container went away: the same bytes must now be refused
        with pytest.raises(WebhookFailure) as failure:
            await hook.consult(call("CreateContainer", known))
        await hook.aclose()
    assert failure.value.kind is FailureKind.INVALID and "unknown container" in str(failure.value)


async def test_remembered_replies_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(webhook_module, "MAX_CHECKED", 3)
    counter = iter(range(1000))

    async def distinct(_: Seen) -> Reply:
        return Reply(json={"warnings": [f"w{next(counter)}"]})

    # Valid (each warning inside the contract's 1024 characters) and over the size kept.
    many = webhook_module.MAX_CHECKED_BYTES // 1000 + 1
    big: dict[str, Any] = {"warnings": ["x" * 1000] * many}
    async with policy_double() as double:
        route = double.route("/v1/policy", distinct)
        hook = Webhook(spec(sock=double.sock))
        for _ in range(5):
            await hook.consult(call("CreateContainer"))
        assert len(hook._checked) == 3
        route.answer = Reply(json=big)  # too big to keep
        await hook.consult(call("CreateContainer"))
        await hook.aclose()
    assert len(hook._checked) == 3
    assert all(len(raw) <= webhook_module.MAX_CHECKED_BYTES for _, raw in hook._checked)


async def test_a_reply_bounded_by_its_target_is_checked_every_time() -> None:
    """oom_score_adj 3 is fine for a Burstable container and refused for a BestEffort one:
    the same bytes must not carry one container's verdict to the next."""
    def target_call(kubelet_oom: int) -> CallRequest:
        container = api.Container(id="new-container")
        container.linux.oom_score_adj.value = kubelet_oom
        scope = Scope("CreateContainer", DEFAULT_ALLOW, set().__contains__, "new-container",
                      ReplyTarget(container, None))
        return CallRequest("CreateContainer", "uid", b'{"name":"containerd"}', {}, scope, 1.0)

    reply = {"adjust": {"linux": {"oom_score_adj": 3}}}
    async with policy_double() as double:
        double.route("/v1/policy", Reply(json=reply))
        hook = Webhook(spec(sock=double.sock))
        assert (await hook.consult(target_call(500))).adjust is not None
        with pytest.raises(WebhookFailure) as failure:
            await hook.consult(target_call(1000))
        await hook.aclose()
    assert failure.value.kind is FailureKind.DISALLOWED
    assert "below 1000" in failure.value.reason
