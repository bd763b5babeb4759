"""`PolicyRunner.send_pod`: a pod manifest's lifecycle through a policy, in-process.

The manifests are translated exactly as `nri-webhook-bridge try` translates them (bridge.kube:
kubelet's rules, then the runtime's additions from its profile, bridge.runtime_facts), and the
requests are the bodies the bridge would POST, in the order `try` plays them (both drive one
generator, bridge.kube.call_order): RunPodSandbox; each init container created, started and
stopped (it exits) before the next; sidecars and regular containers created and started; then
the teardown. The container each later event carries is the one the runtime would have: the
policy's adjustment and updates applied (the rules the simulator applies too,
bridge.runtime_facts.apply). A reject stops that container and, for an init container or
sidecar, the containers after it, as kubelet would. Replies are checked like `send`'s.

Owns: driving that order for one policy and the per-container result (``PodContainer``, shaped
like one object of `try --output json`). Must not: start servers or sockets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf.message import Message

from bridge.contract.adjustment import nri_adjustment_from_json
from bridge.contract.applied_view import reply_notices
from bridge.contract.capabilities import runtime_ref
from bridge.contract.catalogue import EVENTS_BY_RPC, REQUEST_TYPES
from bridge.contract.convert import from_json
from bridge.contract.request_body import DEFAULT_BUDGET_MS, envelope_document, event_payload
from bridge.contract.runtime_effects import Route
from bridge.kube import (
    IN_PLACE,
    SNAPSHOT,
    CallStep,
    CriPod,
    NodeSpec,
    container,
    effective,
    kubelet_order,
    load_pods,
    pod_sandbox,
    translate,
)
from bridge.proto.nri import api_pb2 as api
from bridge.runtime_facts.apply import apply_adjustment, apply_update
from bridge.runtime_facts.cri_events import CRI_EVENTS
from bridge.runtime_facts.profiles import DEFAULT_PROFILE, get_profile

Send = Callable[[dict[str, Any]], Any]  # body -> Reply (PolicyRunner.send bound to a policy)


@dataclass(slots=True)
class PodContainer:
    """One container's events and the policy's replies, like one object of `try`'s JSON."""

    pod: str  # namespace/name
    container: str
    kind: str  # init | sidecar | container
    qos_class: str
    cgroup_parent: str
    requests: dict[str, dict[str, Any]] = field(default_factory=dict)  # event -> body
    replies: dict[str, Any] = field(default_factory=dict)  # event -> Reply (first one)
    effective: dict[str, Any] | None = None
    not_started: str | None = None
    # What the profile's runtime does not apply as the replies say (try's `runtime` list,
    # webhook ""): "containerd 2.1.9 ignores memory.swappiness in an adjustment".
    runtime: list[dict[str, str]] = field(default_factory=list)

    @property
    def adjust(self) -> dict[str, Any]:
        reply = self.replies.get("CreateContainer")
        return dict(reply.adjust) if reply is not None and reply.reject is None else {}

    @property
    def update(self) -> list[dict[str, Any]]:
        return [u for r in self.replies.values() if r.reject is None for u in r.update]

    @property
    def reject(self) -> dict[str, str] | None:
        return next(({"event": e, "reason": r.reject} for e, r in self.replies.items()
                     if r.reject is not None), None)

    @property
    def warnings(self) -> list[dict[str, str]]:
        return [{"event": e, "message": w} for e, r in self.replies.items() for w in r.warnings]


def send_pod(send: Send, paths: Iterable[str | Path], events: frozenset[str],
             node: NodeSpec, profile_key: str = DEFAULT_PROFILE) -> list[PodContainer]:
    profile = get_profile(profile_key)
    runtime = runtime_ref(profile.runtime_name, profile.runtime_version, profile.nri)
    out: list[PodContainer] = []
    seq = 0

    def call(event: str, pod: api.PodSandbox, ctr: api.Container | None,
             results: list[PodContainer]) -> Any:
        nonlocal seq
        if event not in events:
            return None
        request: Message = REQUEST_TYPES[EVENTS_BY_RPC[event]]()
        getattr(request, "pod").CopyFrom(pod)  # noqa: B009 - every request has a pod
        if ctr is not None:
            getattr(request, "container").CopyFrom(ctr)  # noqa: B009
        seq += 1
        body = envelope_document(event, f"kit-{seq}", runtime, DEFAULT_BUDGET_MS, False,
                                 event_payload(event, request))
        reply = send(body)
        for result in results:
            result.requests.setdefault(event, body)
            result.replies.setdefault(event, reply)
        return reply

    for index, manifest_pod in enumerate(load_pods([str(p) for p in paths])):
        cri = translate(manifest_pod, node)
        out.extend(_play(cri, pod_sandbox(cri, profile, index), profile, call))
    return out


def _play(cri: CriPod, sandbox: api.PodSandbox, profile: Any,
          call: Callable[[str, api.PodSandbox, api.Container | None, list[PodContainer]], Any],
          ) -> list[PodContainer]:
    """Drive kubelet's order (bridge.kube.call_order, as `try` does) with the policy in-process:
    the runtime's state of each container kept here, the simulator's rules applied to it."""
    results = {c.name: PodContainer(f"{cri.namespace}/{cri.name}", c.name, c.kind.value,
                                    cri.qos_class, cri.cgroup_parent) for c in cri.containers}
    everyone = list(results.values())
    ctrs = {c.name: container(cri, c, sandbox, profile) for c in cri.containers}
    state: dict[str, api.Container] = {}  # container id -> the container as the runtime has it

    def cri_call(name: str, ctr: api.Container | None, who: list[PodContainer]) -> bool:
        """The NRI events of one CRI call; False when the policy rejected one."""
        for event in CRI_EVENTS[name]:
            if not profile.delivers(event):
                continue
            reply = call(event.rpc_name, sandbox, ctr, who)
            if reply is None:
                continue
            if reply.reject is not None:
                return False
            notes = reply_notices("", event.rpc_name, {"adjust": reply.adjust,
                                                       "update": reply.update},
                                  profile.runtime)
            for result in who:
                result.runtime += notes
            for update in reply.update:
                target = state.get(update.get("container_id", ""))
                if target is not None and target.state != api.CONTAINER_STOPPED:
                    apply_update(target, from_json(update, api.ContainerUpdate), profile.runtime,
                                 Route.UPDATE)
            if event.rpc_name == "CreateContainer" and ctr is not None:
                ctr = apply_adjustment(ctr, nri_adjustment_from_json(reply.adjust), profile.runtime)
                ctr.state = api.CONTAINER_CREATED
                state[ctr.id] = ctr
        return True

    def perform(step: CallStep) -> bool:
        if step.call == IN_PLACE:  # one pod: nothing to wait for
            return True
        if step.container is None:
            return cri_call(step.call, None, everyone)
        result, ctr = results[step.container], ctrs[step.container]
        if step.call == SNAPSHOT:
            result.effective = effective(state[ctr.id])
            return True
        ok = cri_call(step.call, state.get(ctr.id, ctr), [result])
        if step.call == "CreateContainer" and ok and ctr.id not in state:
            ctr.state = api.CONTAINER_CREATED  # CreateContainer not subscribed: kept as is
            state[ctr.id] = ctr
        elif step.call == "StartContainer":
            state[ctr.id].state = api.CONTAINER_RUNNING if ok else api.CONTAINER_CREATED
        elif step.call == "StopContainer":
            state[ctr.id].state = api.CONTAINER_STOPPED
        return ok

    order = kubelet_order(cri)
    step = next(order)
    while True:
        try:
            step = order.send(perform(step))
        except StopIteration as done:
            for name, why in done.value.items():
                results[name].not_started = why
            return everyone
