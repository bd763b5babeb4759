"""The bridge as an external NRI plugin of containerd 2.1.9 on a cgroup v2 + systemd node.

Registration, every lifecycle event, a static adjustment and a webhook adjustment read back
from the container scope's cgroup v2 files (``cpu.weight`` as the node's runc converts
shares, ``cpu.max``, ``cpuset.cpus``, ``memory.max``) and its environment, UpdateContainer,
a validating reject in the CRI error, and re-registration after containerd restarts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from tests.e2e import resource_policy
from tests.e2e.bridge_proc import Bridge, has_msg, is_event
from tests.e2e.conftest import StackFactory, outcome_of
from tests.e2e.containerd import Containerd
from tests.e2e.cri import CriClient
from tests.e2e.inspect_proc import environ_after_exec
from tests.e2e.procs import scaled
from tests.e2e.test_bridge import (
    ADJUSTED_CPUSET,
    ADJUSTED_MEMORY_BYTES,
    ADJUSTED_SHARES,
    PLUGIN_ID,
    REQUESTED_SHARES,
    UPDATED_SHARES,
    BridgeFactory,
    count,
    wait_containerd_log,
)
from tests.waiting import wait_until

from . import guest_node, reject_policy
from .guest_node import cgroup_dir, read

pytestmark = pytest.mark.node_v2
NODE_V2_WEIGHT = 16  # run-guest.sh's split: seconds in a guest / 10

REPO = Path(__file__).resolve().parents[2]


def assert_static_adjustment(containerd: Containerd, cri: CriClient, container_id: str) -> None:
    pid = cri.container_pid(container_id)
    env = environ_after_exec(pid)
    assert env.get("NRI_E2E") == "injected", sorted(env)
    assert env.get("E2E_BASE") == "1"
    scope = cgroup_dir(pid)
    assert scope.name == f"cri-containerd-{container_id}.scope", scope
    want = guest_node.runc_weight(containerd.runtime.runc, ADJUSTED_SHARES)
    assert read(scope, "cpu.weight") == str(want)
    assert read(scope, "cpuset.cpus") == ADJUSTED_CPUSET
    assert read(scope, "memory.max") == str(ADJUSTED_MEMORY_BYTES)


def test_registers_and_adjusts_through_v2_files(
    containerd: Containerd, clean_pods: CriClient, start_bridge: BridgeFactory
) -> None:
    offset = containerd.log_size()
    bridge = start_bridge()
    wait_containerd_log(containerd, f'external:{PLUGIN_ID}[{bridge.pid}]\\" registered', offset,
                        timeout_s=scaled(5))  # fmt: skip
    pod = guest_node.run_pod(clean_pods, "adjust")
    container_id = clean_pods.run_container(pod.pod)
    bridge.wait_for("CreateContainer event", is_event("CreateContainer", container_id))
    assert cgroup_dir(clean_pods.container_pid(container_id)).parent == pod.directory
    assert_static_adjustment(containerd, clean_pods, container_id)


def test_every_event_and_an_update(
    containerd: Containerd, clean_pods: CriClient, start_bridge: BridgeFactory
) -> None:
    bridge = start_bridge()
    pod = guest_node.run_pod(clean_pods, "lifecycle")
    container_id = clean_pods.run_container(pod.pod)
    scope = cgroup_dir(clean_pods.container_pid(container_id))

    clean_pods.update_cpu_shares(container_id, REQUESTED_SHARES)
    bridge.wait_for("UpdateContainer event", is_event("UpdateContainer", container_id))
    # The bridge's update (640 shares) wins over the CRI request's (768), converted by runc.
    guest_node.wait_value(scope, "cpu.weight",
                          str(guest_node.runc_weight(containerd.runtime.runc, UPDATED_SHARES)))

    clean_pods.stop_container(container_id)
    clean_pods.remove_container(container_id)
    clean_pods.stop_pod(pod.pod.id)
    clean_pods.remove_pod(pod.pod.id)
    for event in ("CreateContainer", "PostCreateContainer", "StartContainer",
                  "PostStartContainer", "UpdateContainer", "PostUpdateContainer",
                  "StopContainer", "RemoveContainer"):  # fmt: skip
        bridge.wait_for(f"{event} event", is_event(event, container_id))
    for event in ("RunPodSandbox", "StopPodSandbox", "RemovePodSandbox"):
        bridge.wait_for(f"{event} event", is_event(event))


def test_webhook_adjustment_and_reject(
    containerd: Containerd, clean_pods: CriClient, start_stack: StackFactory
) -> None:
    stack = start_stack(
        webhooks=[
            {"name": "e2e-resources", "events": ["CreateContainer"], "failure_policy": "Fail"},
            {"name": "node-v2-refuse", "events": ["CreateContainer"], "failure_policy": "Fail"},
        ],
        policy_modules=(REPO / "tests" / "e2e" / "resource_policy.py",
                        REPO / "tests" / "node_v2" / "reject_policy.py"),
        koordinator=False,
    )  # fmt: skip
    milli_cpu, memory_mib = 300, 96
    pod = guest_node.run_pod(clean_pods, "webhook", "burstable", annotations={
        resource_policy.CPU_ANNOTATION: str(milli_cpu),
        resource_policy.MEMORY_ANNOTATION: str(memory_mib),
    })  # fmt: skip
    container_id = clean_pods.run_container(pod.pod)
    assert outcome_of(stack, "e2e-resources", "CreateContainer", pod.pod) == "ok"
    pid = clean_pods.container_pid(container_id)
    assert environ_after_exec(pid).get(resource_policy.ENV_KEY) == resource_policy.ENV_VALUE
    scope = cgroup_dir(pid)
    shares = resource_policy.shares_for(milli_cpu)
    assert read(scope, "cpu.weight") == str(guest_node.runc_weight(containerd.runtime.runc, shares))
    assert read(scope, "cpu.max") == f"{resource_policy.quota_for(milli_cpu)} 100000"
    assert read(scope, "memory.max") == str(memory_mib * 1024 * 1024)

    refused = guest_node.run_pod(clean_pods, "refused", annotations={
        reject_policy.REFUSE_ANNOTATION: "no containers on this node today"})  # fmt: skip
    with pytest.raises(grpc.RpcError) as failure:
        clean_pods.create_container(refused.pod)
    details = str(failure.value.details())
    assert 'webhook "node-v2-refuse" rejected CreateContainer' in details, details
    assert "no containers on this node today" in details, details
    # The refused pod's slice holds its sandbox's scope and nothing else.
    scopes = {d.name for d in refused.directory.glob("cri-containerd-*.scope")}
    assert scopes <= {f"cri-containerd-{refused.pod.id}.scope"}, scopes


def test_reregisters_after_containerd_restarts(
    containerd: Containerd, clean_pods: CriClient, start_bridge: BridgeFactory
) -> None:
    bridge = start_bridge()
    survivor = clean_pods.run_container(guest_node.run_pod(clean_pods, "survivor").pod)
    registrations = count(bridge, has_msg("registered"))
    offset = containerd.log_size()
    containerd.restart()
    clean_pods.wait_ready()
    bridge.wait_for("connection loss", has_msg("connection lost"))
    bridge.wait_for("re-registration",
                    lambda _: count(bridge, has_msg("registered")) > registrations,
                    timeout_s=60)  # fmt: skip
    wait_containerd_log(containerd, f'external:{PLUGIN_ID}[{bridge.pid}]\\" registered', offset,
                        timeout_s=scaled(5))  # fmt: skip
    syncs = [x for x in bridge.lines() if x.get("event") == "Synchronize"]
    assert syncs[-1].get("containers", 0) >= 1, syncs[-1]
    assert_static_adjustment(containerd, clean_pods, survivor)
    after = clean_pods.run_container(guest_node.run_pod(clean_pods, "after-restart").pod)
    bridge.wait_for("CreateContainer event", is_event("CreateContainer", after))
    assert_static_adjustment(containerd, clean_pods, after)


def _bridge_state(bridge: Bridge) -> dict[str, Any]:
    transport = httpx.HTTPTransport(uds=str(bridge.control_socket))
    with httpx.Client(transport=transport, base_url="http://bridge", timeout=30) as client:
        reply = client.get("/v1/state")
        reply.raise_for_status()
        state: dict[str, Any] = reply.json()
        return state


def test_pod_removed_after_a_restart_leaves_the_bridge_state(
    containerd: Containerd, clean_pods: CriClient, start_bridge: BridgeFactory
) -> None:
    """#24 finding 4: a pod made before containerd restarts and removed after it is gone
    from the bridge's GET /v1/state (the re-registration's Synchronize and the removal
    events after it), not kept with 0 containers."""
    bridge = start_bridge()
    early = guest_node.run_pod(clean_pods, "made-before-restart")
    early_container = clean_pods.run_container(early.pod)
    kept = guest_node.run_pod(clean_pods, "kept")
    kept_container = clean_pods.run_container(kept.pod)
    assert {p["id"] for p in _bridge_state(bridge)["pods"]} >= {early.pod.id, kept.pod.id}
    registrations = count(bridge, has_msg("registered"))
    containerd.restart()
    clean_pods.wait_ready()
    bridge.wait_for("re-registration",
                    lambda _: count(bridge, has_msg("registered")) > registrations,
                    timeout_s=60)  # fmt: skip
    clean_pods.stop_container(early_container)
    clean_pods.remove_container(early_container)
    clean_pods.stop_pod(early.pod.id)
    clean_pods.remove_pod(early.pod.id)
    def dropped() -> bool:
        return early.pod.id not in {p["id"] for p in _bridge_state(bridge)["pods"]}
    wait_until(dropped, what="the bridge drops the removed pod", timeout_s=scaled(10),
               interval_s=0.5, details=lambda: str(_bridge_state(bridge)))
    state = _bridge_state(bridge)
    pods = {p["id"] for p in state["pods"]}
    containers = {c["id"] for c in state["containers"]}
    assert early.pod.id not in pods, state
    assert early_container not in containers, state
    assert kept.pod.id in pods and kept_container in containers, state
