"""Builders for webhook request bodies and koordinator pods used across the policy-server tests,
a policy that reads the node view (``node_reader``), and an engine's evaluation of a request
given as a JSON value (``evaluate_json``) with the reply it encodes to (``reply_of``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from policy_server.engine.evaluate import Engine, Evaluation
from policy_server.engine.reply import decision_to_reply
from policy_server.engine.request import node_synchronize, parse_request
from policy_server.exceptions import PayloadError
from policy_server.policies.koordinator_qos import POLICY_NAME, KoordinatorQoS
from policy_server.policies.koordinator_qos.rules import Rules, Trust, rules_from_doc
from policy_server.policies.koordinator_qos.target import ContainerTarget, PodTarget
from policy_server.sdk import EventName, NodeView, Policy, ReloadResult
from policy_server.sdk.model import Event
from policy_server.sdk.node_facts import UNKNOWN_NODE, NodeFacts
from policy_server.service import PolicyServer
from policy_server.service.policy_host import Host

API = "nri-webhook-bridge/v1"


def evaluate_json(engine: Engine, policy_name: str, body: object) -> Evaluation:
    """Evaluate a request given as a JSON value through the server's one request path
    (``RequestError`` if the server would refuse it)."""
    try:
        raw = orjson.dumps(body)
    except TypeError:  # an integer beyond 64 bits: the standard library writes it
        raw = json.dumps(body).encode()
    return engine.evaluate(policy_name, parse_request(raw, engine.needs_payload(policy_name)))


def reply_of(evaluation: Evaluation) -> dict[str, Any]:
    """The reply body an evaluation's decision encodes to, before the server settles it (the
    server's: ``engine.settled.Settled.reply``)."""
    return decision_to_reply(evaluation.decision, evaluation.notes)

POOLS_2_NUMA = [
    {"socket": 0, "node": 0, "cpuset": "0-7"},
    {"socket": 1, "node": 1, "cpuset": "8-15"},
]
BE_POOLS_2_NUMA = [
    {"socket": 0, "node": 0, "cpuset": "2-7"},
    {"socket": 1, "node": 1, "cpuset": "10-15"},
]



def synchronize_event(
    source: str, pods: Sequence[Mapping[str, Any]], containers: Sequence[Mapping[str, Any]]
) -> Event:
    """The server's own Synchronize (engine.request.node_synchronize) for these pods and
    containers; raises PayloadError naming the first entry refused."""
    sync = node_synchronize(source, pods, containers)
    if sync.skipped:
        first = sync.skipped[0]
        raise PayloadError(first.where(), first.message)
    return sync.event


def pod(
    *,
    uid: str = "uid-1",
    name: str = "pod-1",
    qos: str | None = None,
    cgroup_parent: str = "/kubepods/podUID",
    labels: dict[str, str] | None = None,
    annotations: dict[str, Any] | None = None,
    pod_id: str = "sandbox-1",
) -> dict[str, Any]:
    """A PodSandbox JSON object; annotation values that are not strings are JSON-encoded."""
    all_labels = dict(labels or {})
    if qos is not None:
        all_labels["koordinator.sh/qosClass"] = qos
    encoded = {
        k: v if isinstance(v, str) else json.dumps(v) for k, v in (annotations or {}).items()
    }
    return {
        "id": pod_id,
        "name": name,
        "uid": uid,
        "namespace": "default",
        "labels": all_labels,
        "annotations": encoded,
        "linux": {"cgroup_parent": cgroup_parent},
    }


def container(
    *,
    cid: str = "ctr-1",
    name: str = "app",
    pod_id: str = "sandbox-1",
    cpu: dict[str, Any] | None = None,
    memory_limit: int | None = None,
    unified: dict[str, str] | None = None,
    state: str = "CONTAINER_RUNNING",
    env: list[str] | None = None,
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if cpu is not None:
        resources["cpu"] = cpu
    if memory_limit is not None:
        resources["memory"] = {"limit": memory_limit}
    if unified is not None:
        resources["unified"] = unified
    out: dict[str, Any] = {
        "id": cid,
        "pod_sandbox_id": pod_id,
        "name": name,
        "state": state,
        "linux": {"resources": resources},
    }
    if env is not None:
        out["env"] = env
    return out


def node_reader(name: str = "node-reader") -> Policy[None]:
    """A policy whose observer reads the node view: on a server with it, the engine keeps the
    view (else no policy reads it and nothing is folded)."""
    policy = Policy(name)

    @policy.observe(*EventName)
    def look(event: Event, *, node: NodeView) -> None:
        return None

    return policy


def envelope(event: str, **payload: Any) -> dict[str, Any]:
    return {
        "api_version": API,
        "uid": f"test-{event}",
        "event": event,
        "runtime": {"name": "containerd", "version": "1.7.24~ds1"},
        "budget_ms": 1800,
        "dry_run": False,
        **payload,
    }


def event(name: str, **payload: Any) -> Event:
    return request(envelope(name, **payload))


def rules(**doc: Any) -> Rules:
    """Rules from a document; ``pools=True`` adds the two-NUMA-node topology."""
    return rules_from_doc(doc)


# The rules' trust for every key koordinator-qos reads: the tests that model an annotation
# koord-scheduler/koord-manager wrote on a pod kubelet did not back (koordinator's own semantics).
TRUST_ALL = {"annotations": ["scheduling.koordinator.sh/resource-status",
                             "node.koordinator.sh/extended-resource-spec",
                             "scheduling.koordinator.sh/device-allocated",
                             "koordinator.sh/cpuQOS", "koordinator.sh/oom-score-adj",
                             "koordinator.sh/oom-score-adj-spec"]}


# Trust of the qosClass label alone: koordinator's semantics for a label koord-manager set.
TRUST_LABEL = Trust(annotations=frozenset({"koordinator.sh/qosClass"}))


def topology(**extra: Any) -> dict[str, Any]:
    return {"node.koordinator.sh/cpu-shared-pools": POOLS_2_NUMA, **extra}


def pod_target(trust: Trust | None = None, **kwargs: Any) -> PodTarget:
    """A pod's target; ``trust`` the rules' (none by default, as a rules file without it)."""
    event = synchronize_event("test", [pod(**kwargs)], [])
    return PodTarget.of(event.pods[0], trust if trust is not None else Trust())


def container_target(
    quota: int | None = None, name: str = "app", node: NodeFacts = UNKNOWN_NODE, **kwargs: Any
) -> ContainerTarget:
    return ContainerTarget(pod_target(**kwargs), "ctr-1", name, quota, node)


def batch_spec(containers: dict[str, dict[str, dict[str, str]]]) -> dict[str, Any]:
    return {"node.koordinator.sh/extended-resource-spec": {"containers": containers}}


def request(body: Any) -> Event:
    """A request body (a JSON value) through the server's one request path."""
    return parse_request(json.dumps(body).encode())


# What a container cgroup's directory holds on cgroup v2 (the kubepods cgroup has the same files):
# a stock kernel (Debian 6.x), and an Alibaba Cloud Linux / Anolis one with group identity.
STOCK_V2_FILES = (
    "cgroup.controllers", "cgroup.subtree_control", "cgroup.procs", "cgroup.type",
    "cpu.weight", "cpu.max", "cpu.idle", "cpu.stat", "cpu.pressure",
    "cpuset.cpus", "cpuset.mems", "memory.max", "memory.high", "memory.oom.group",
    "io.weight", "pids.max",
)
ANOLIS_V2_FILES = (*STOCK_V2_FILES, "cpu.bvt_warp_ns")
# Facts of cgroup v2 nodes as the server's probe finds them.
STOCK_V2 = NodeFacts(cgroup_version=2, cgroup_files=frozenset(STOCK_V2_FILES))
ANOLIS_V2 = NodeFacts(cgroup_version=2, cgroup_files=frozenset(ANOLIS_V2_FILES))
V2_CONTROLLERS = "cpuset cpu io memory pids"


def cgroup_v2_root(
    root: Path,
    kubepods: tuple[str, ...] | None = STOCK_V2_FILES,
    *,
    group: str = "kubepods.slice",
    passed_on: str = V2_CONTROLLERS,
) -> Path:
    """A cgroup v2 root as the server's probe sees it: ``cgroup.controllers`` at the root (but
    none of the per-cgroup knobs, as on a real root), and a kubepods cgroup holding ``kubepods``
    files (None: kubelet has made none) whose ``cgroup.subtree_control`` is ``passed_on``."""
    root.mkdir(parents=True)
    (root / "cgroup.controllers").write_text(V2_CONTROLLERS + "\n")
    (root / "cgroup.subtree_control").write_text(V2_CONTROLLERS + "\n")
    (root / "cpu.stat").write_text("usage_usec 0\n")
    if kubepods is not None:
        (root / group).mkdir()
        for name in kubepods:
            (root / group / name).write_text("")
        (root / group / "cgroup.controllers").write_text(V2_CONTROLLERS + "\n")
        (root / group / "cgroup.subtree_control").write_text(passed_on + "\n")
    return root


def koordinator_of(server: PolicyServer) -> KoordinatorQoS:
    """The koordinator-qos a server built (its rules source), reached through its extension."""
    hook = server.registry.get(POLICY_NAME).extensions.describe
    owner = getattr(hook, "__self__", None)
    assert isinstance(owner, KoordinatorQoS)
    return owner


async def poll_rules(server: PolicyServer) -> ReloadResult:
    """One poll of koordinator-qos's rules file, reported to the server as its background task
    reports it (``PolicyHost.config_polled``)."""
    koordinator = koordinator_of(server)
    result = koordinator.rules.poll()
    await koordinator.reported(Host(server, POLICY_NAME), result)
    return result
