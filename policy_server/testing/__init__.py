"""The test kit for policy authors: run a policy in-process and assert on its replies.

``PolicyRunner`` holds one ``Engine`` over the policies under test, so a sequence of requests
sees the same policy state a running server would (observers, stateful policies). Every request
goes through the server's request path (the same 422s) and every decision through the server's
one settle step (``policy_server.service.settle``), as a server with its default executor
(``--node-effects off``: the effects' warnings in the reply) and a bridge to push through would
settle it, so the reply is the server's by construction; every reply is checked against the
contract's ``WebhookReply`` as the bridge checks it (the server sends what a policy decided
without checking it again), so a test that passes here does not meet a 422 from the server or
a refused reply at the bridge. Recordings from ``nri-webhook-bridge record`` are replayed with
the same comparison as ``nri-webhook-bridge replay`` (replies canonicalized through the NRI
conversion, warnings not compared). ``send_pod`` plays Kubernetes manifests as
``nri-webhook-bridge try`` does (bridge.kube's translation). The pytest fixture
``policy_runner`` is in ``policy_server.testing.plugin`` (loaded automatically when this
package is installed).

Must not start servers or sockets: everything runs in the calling thread.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from bridge.contract.catalogue import CONTAINER_EVENTS, EventName
from bridge.contract.request_body import default_envelope
from bridge.kube import NodeSpec
from bridge.reply_review.replay import ReplayCase, ReplayOutcome, compare, load_cases
from bridge.runtime_facts.profiles import DEFAULT_PROFILE
from policy_server.bridge_link.pusher import PushJob
from policy_server.engine.evaluate import Engine, Evaluation
from policy_server.engine.loader import load_policies
from policy_server.engine.reply import check_reply
from policy_server.engine.request import parse_request
from policy_server.engine.settled import Settled
from policy_server.exceptions import InvalidReplyError, PolicyServerError, RequestError
from policy_server.node.execution import ExecutorMode
from policy_server.node.executor import NodeExecutor
from policy_server.policies import build_builtin
from policy_server.sdk.node_facts import UNKNOWN_NODE, NodeFacts
from policy_server.sdk.node_view import NodeView
from policy_server.sdk.registry import Policy, Registry
from policy_server.service.settle import Settle
from policy_server.telemetry import Metrics
from policy_server.testing.pods import PodContainer, send_pod

__all__ = [
    "InvalidReply",
    "InvalidRequest",
    "NodeSpec",
    "PodContainer",
    "PolicyRunner",
    "Replay",
    "Reply",
    "load_request",
    "make_request",
]


class InvalidRequest(PolicyServerError):
    """The request is not a valid webhook envelope (the server would answer 422)."""


class InvalidReply(PolicyServerError):
    """The policy produced a reply outside the contract (the bridge would refuse it)."""


@dataclass(frozen=True, slots=True)
class Reply:
    """One reply, as the HTTP endpoint sends it (``json``: the settled reply the server
    encodes), with shortcuts; ``settled`` is the server's settle step's value."""

    json: dict[str, Any]
    settled: Settled

    @property
    def evaluation(self) -> Evaluation:
        """The engine's evaluation the reply was settled from."""
        return self.settled.evaluation

    @property
    def adjust(self) -> dict[str, Any]:
        return dict(self.json.get("adjust", {}))

    @property
    def update(self) -> list[dict[str, Any]]:
        return list(self.json.get("update", []))

    @property
    def reject(self) -> str | None:
        reject = self.json.get("reject")
        return str(reject["reason"]) if reject is not None else None

    @property
    def warnings(self) -> list[str]:
        return list(self.json.get("warnings", []))

    @property
    def pushed(self) -> list[dict[str, Any]]:
        """Updates the policy pushes through the bridge after this reply (``Decision.push``;
        updates that change nothing left out, as the server leaves them out)."""
        return list(self.settled.pushes)

    @property
    def no_change(self) -> bool:
        """True for ``{}`` (warnings aside): the runtime is told to change nothing."""
        return not (set(self.json) - {"warnings"})


@dataclass(frozen=True, slots=True)
class Replay:
    """The outcome of replaying recordings: one ``Outcome`` per recorded event."""

    outcomes: tuple[ReplayOutcome, ...]

    @property
    def failed(self) -> tuple[ReplayOutcome, ...]:
        return tuple(o for o in self.outcomes if not o.ok)

    @property
    def ok(self) -> bool:
        return bool(self.outcomes) and not self.failed

    def report(self) -> str:
        """What ``nri-webhook-bridge replay`` would print for the failures, plus a summary."""
        lines = []
        for outcome in self.failed:
            label = f"{outcome.case.request.get('event', '?')} ({outcome.case.where})"
            lines.append(f"ERROR {label}: {outcome.error}" if outcome.error
                         else f"DIFF  {label}\n{outcome.diff}")  # fmt: skip
        lines.append(f"{len(self.outcomes) - len(self.failed)} passed, {len(self.failed)} failed")
        return "\n".join(lines)

    def assert_ok(self) -> None:
        """Raise ``AssertionError`` with the report unless every event matched."""
        if not self.ok:
            raise AssertionError(self.report() if self.outcomes else "no events replayed")


class PolicyRunner:
    """Runs policies in-process; see the module docstring.

    ``PolicyRunner(policy)``, ``PolicyRunner.from_module("my_policy.py")`` or
    ``PolicyRunner.builtin("ulimit-adjuster", {"max": {"nofile": 65536}})``.
    """

    def __init__(self, *policies: Policy[Any], facts: NodeFacts = UNKNOWN_NODE) -> None:
        """``facts``: the node the server would run on (``NodeView.facts``), e.g.
        ``NodeFacts(cgroup_version=1)`` to test what a policy answers on cgroup v1, or
        ``NodeFacts(cgroup_version=2, cgroup_files=...)`` on a probed cgroup v2 node."""
        if not policies:
            raise ValueError("PolicyRunner needs at least one policy")
        registry = Registry()
        for policy in policies:
            registry.add(policy)
        self.registry = registry
        # Folded even if no policy reads it: ``node`` shows it to the test (no policy can tell).
        self.engine = Engine(registry, facts, always_fold=True)
        # The server's settle step, as a server with its default executor mode (off: nothing
        # written, the effects' warnings in the reply) and a bridge that takes the pushes.
        self.settle = Settle(NodeExecutor(ExecutorMode.OFF), Metrics(), _TakenPushes(),
                             lambda part: f"{part}: not probed in the test kit")

    @classmethod
    def from_module(cls, spec: str | Path, *, facts: NodeFacts = UNKNOWN_NODE) -> PolicyRunner:
        """Every ``Policy`` in a Python file or module, as ``--policy-module`` loads them."""
        return cls(*load_policies([str(spec)]), facts=facts)

    @classmethod
    def builtin(
        cls,
        name: str,
        config: Mapping[str, Any] | Path | None = None,
        *,
        facts: NodeFacts = UNKNOWN_NODE,
    ) -> PolicyRunner:
        """A built-in policy (``--policy NAME``), configured from a dict or a YAML file."""
        return cls(build_builtin(name, config), facts=facts)

    @property
    def node(self) -> NodeView:
        """The node as the policies see it now (pods and containers from the events so far)."""
        return self.engine.node.view

    @property
    def policy_names(self) -> list[str]:
        return [p.name for p in self.registry]

    def _policy(self, name: str | None) -> str:
        if name is not None:
            return name
        names = self.policy_names
        if len(names) != 1:
            raise ValueError(f"several policies are loaded ({', '.join(names)}): pass policy=")
        return names[0]

    def send(self, request: Mapping[str, Any] | str | Path, policy: str | None = None) -> Reply:
        """Evaluate one request (a body, or the path of a JSON file) and check the reply."""
        body = load_request(request) if isinstance(request, str | Path) else dict(request)
        name = self._policy(policy)
        try:  # the server's one request path: the same 422s, as exceptions
            event = parse_request(_body_bytes(body), self.engine.needs_payload(name))
            evaluation = self.engine.evaluate(name, event)
        except RequestError as exc:
            raise InvalidRequest(f"not a webhook request: {_problems(exc)}") from None
        settled = self.settle.reply_now(evaluation)
        try:  # the contract check the bridge makes of every reply, as an exception
            check_reply(settled.body())
        except InvalidReplyError as exc:
            raise InvalidReply(f"reply {settled.reply} is outside the contract: {exc}") from None
        return Reply(settled.reply, settled)

    def replay(
        self,
        *recordings: str | Path,
        expected: str | Path | None = None,
        policy: str | None = None,
    ) -> Replay:
        """Replay JSONL recordings, comparing each reply with the recorded (or expected) one."""
        cases = load_cases([Path(p) for p in recordings], Path(expected) if expected else None)
        return Replay(tuple(self._replay_one(case, policy) for case in cases))

    def _replay_one(self, case: ReplayCase, policy: str | None) -> ReplayOutcome:
        # As `nri-webhook-bridge replay` sends it: a dry run of the recorded request.
        try:
            reply = self.send(dict(case.request, dry_run=True), policy)
        except (InvalidRequest, InvalidReply) as exc:
            return ReplayOutcome(case, None, str(exc), "")
        return compare(case, reply.json)

    def send_pod(
        self,
        *manifests: str | Path,
        policy: str | None = None,
        node: NodeSpec | None = None,
        profile: str = DEFAULT_PROFILE,
        events: Iterable[str] | None = None,
    ) -> list[PodContainer]:
        """Play Kubernetes manifests through the policy as ``nri-webhook-bridge try`` does
        (same translation, same request bodies, same order); one ``PodContainer`` per
        container. ``events`` defaults to every event the policy handles."""
        name = self._policy(policy)
        wanted = (frozenset(events) if events is not None
                  else frozenset(e.value for e in self.registry.get(name).events))
        return send_pod(lambda body: self.send(body, name), manifests, wanted,
                        node or NodeSpec(), profile)

    def events(self, *recordings: str | Path) -> Iterator[dict[str, Any]]:
        """The recorded requests, in order (to send them one by one and assert yourself)."""
        for case in load_cases([Path(p) for p in recordings], None):
            yield case.request


class _TakenPushes:
    """The push outlet of the kit's settle step: takes every job (``Reply.pushed`` shows them),
    as the server's queue to a bridge does."""

    def submit(self, job: PushJob) -> bool:
        return True

    async def join(self) -> None:
        return None


def _body_bytes(body: object) -> bytes:
    """A request given as a JSON value, as the bytes the server's request path reads."""
    try:
        return orjson.dumps(body)
    except TypeError:  # an integer beyond 64 bits: the standard library writes it
        return json.dumps(body).encode()


def _problems(error: RequestError) -> str:
    """``container.linux.resources.cpu.shares: Input should be ...; ...`` from a 422's detail."""
    out = []
    for entry in error.detail:
        loc = entry.get("loc")
        where = ".".join(str(p) for p in loc[1:]) if isinstance(loc, list) else ""
        out.append(f"{where}: {entry.get('msg')}")
    return "; ".join(out)


def load_request(path: str | Path) -> dict[str, Any]:
    """A request body from a JSON file (e.g. ``examples/requests/*.json``)."""
    body = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(body, dict):
        raise InvalidRequest(f"{path}: expected a JSON object")
    return body


def make_request(
    event: EventName | str,
    *,
    pod: Mapping[str, Any] | None = None,
    container: Mapping[str, Any] | None = None,
    pod_annotations: Mapping[str, str] | None = None,
    base: Mapping[str, Any] | None = None,
    **payload: Any,
) -> dict[str, Any]:
    """A request envelope for ``event``: ``base`` (e.g. a fixture) or a minimal pod/container.

    ``pod``/``container`` replace the payload objects; ``pod_annotations`` are added to the
    pod's; any other keyword (``linux_resources``, ``pods``, ...) is set as given.
    """
    name = EventName(event)
    body: dict[str, Any] = (copy.deepcopy(dict(base)) if base is not None
                            else default_envelope(name.value, f"test-{name.value}"))
    body["event"] = name.value
    if pod is not None:
        body["pod"] = dict(pod)
    elif name is not EventName.SYNCHRONIZE:
        body.setdefault("pod", {"id": "pod-1", "name": "pod", "namespace": "default"})
    if container is not None:
        body["container"] = dict(container)
    elif name in CONTAINER_EVENTS:
        body.setdefault("container", {"id": "ctr-1", "pod_sandbox_id": "pod-1", "name": "app"})
    if pod_annotations:
        body["pod"] = dict(body["pod"])
        body["pod"]["annotations"] = {**body["pod"].get("annotations", {}), **pod_annotations}
    body.update(payload)
    return body
