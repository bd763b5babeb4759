"""Policies served over HTTP, against real containerd (1.7.24 and 2.1.9).

Each test runs the whole chain as separate processes: ``nri-policy-server`` on a
private Unix socket, ``nri-webhook-bridge run`` with a ``webhooks:`` config pointing at
it (and a control socket the policy server pushes rule changes through), and a private
containerd driven through CRI. The assertions are on what the kernel says about the
container: ``/proc/<pid>/environ`` and its cgroup v1 files. Every expected value is one
the *policy* decided, chosen to differ from what the CRI request itself asked for.

- issue 3: a third-party policy (``examples/label_env_policy.py`` plus
  ``tests/e2e/resource_policy.py``) sets env and cgroup values;
- issue 4: the ``koordinator-qos`` bundle: an LSR pod's resource-status cpuset and
  quota -1, a BE pod's batch shares/quota/memory, GPU env injection, and a rule change
  reaching a running container (through CRI UpdateContainerResources) without restarting it.
"""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import pytest

from tests.waiting import wait_until

from . import resource_policy
from .bridge_proc import PLUGIN_INDEX, PLUGIN_NAME, has_msg
from .conftest import Stack, StackFactory, outcome_of
from .containerd import Containerd
from .cri import BASE_CPU_SHARES, BASE_CPUSET, BASE_MEMORY_BYTES, CriClient
from .inspect_proc import cgroup_file, cgroup_values, environ_after_exec
from .policy_proc import REPO

pytestmark = pytest.mark.e2e

MIB = 1024 * 1024
RULE_CHANGE_TIMEOUT_S = 15.0

# --- koordinator formulas (docs/koordinator.md#formulas), written out independently of the
# policy server so the test checks the bundle against the spec, not against itself.
CFS_BASE_PERIOD = 100000
CFS_QUOTA_MIN = 1000
SHARES_MIN, SHARES_MAX = 2, 262144


def milli_cpu_to_shares(milli: int) -> int:
    if milli <= 0:
        return SHARES_MIN
    return min(max(milli * 1024 // 1000, SHARES_MIN), SHARES_MAX)


def milli_cpu_to_quota(milli: int) -> int:
    quota = milli * CFS_BASE_PERIOD // 1000
    return -1 if quota <= 0 else max(quota, CFS_QUOTA_MIN)


def memory_limit(value: int) -> int:
    return value if value > 0 else -1


# --- koordinator annotations, labels and rules -------------------------------------------
QOS_LABEL = "koordinator.sh/qosClass"
RESOURCE_STATUS = "scheduling.koordinator.sh/resource-status"
EXTENDED_RESOURCE_SPEC = "node.koordinator.sh/extended-resource-spec"
DEVICE_ALLOCATED = "scheduling.koordinator.sh/device-allocated"
BATCH_CPU = "kubernetes.io/batch-cpu"
BATCH_MEMORY = "kubernetes.io/batch-memory"


def koordinator_rules(ls_pool: str = "0-1") -> dict[str, Any]:
    """Rules for this 2-CPU machine: one NUMA node, every cpuset within 0-1."""
    return {
        "topology": {
            "node.koordinator.sh/cpu-shared-pools": [{"socket": 0, "node": 0, "cpuset": ls_pool}],
            "node.koordinator.sh/be-cpu-shared-pools": [{"socket": 0, "node": 0, "cpuset": "0-1"}],
            "kubelet.koordinator.sh/cpu-manager-policy": {"policy": "none"},
        },
        "features": {"GPUEnvInject": True},
    }


KOORDINATOR_WEBHOOK = {
    "name": "koordinator-qos",
    "events": ["CreateContainer", "UpdateContainer", "Synchronize"],
    "timeout": "1s",
    # A policy that cannot answer fails the operation: a lost decision must be loud here.
    "failure_policy": "Fail",
}


def quota(pid: int) -> int:
    return int(cgroup_file(pid, "cpu", "cpu.cfs_quota_us"))


# --- issue 3: a third-party policy over HTTP ------------------------------------------------


def test_http_policy_sets_env_and_cgroup(clean_pods: CriClient, start_stack: StackFactory) -> None:
    """Two webhooks on one policy server: label-env (examples/) and e2e-resources."""
    stack = start_stack(
        webhooks=[
            {"name": "label-env", "events": ["CreateContainer"], "failure_policy": "Fail"},
            {"name": "e2e-resources", "events": ["CreateContainer"], "failure_policy": "Fail"},
        ],
        policy_modules=(
            REPO / "examples" / "label_env_policy.py",
            REPO / "tests" / "e2e" / "resource_policy.py",
        ),
        koordinator=False,
    )
    served = {p["name"] for p in stack.policy.get("/v1/policies")["policies"]}
    assert {"label-env", "e2e-resources"} <= served, served

    milli_cpu, memory_mib = 300, 96
    pod = clean_pods.run_pod(
        "http-policy",
        labels={"example.com/team": "payments"},
        annotations={
            resource_policy.CPU_ANNOTATION: str(milli_cpu),
            resource_policy.MEMORY_ANNOTATION: str(memory_mib),
        },
    )
    container_id = clean_pods.run_container(pod)
    assert outcome_of(stack, "label-env", "CreateContainer", pod) == "ok"
    assert outcome_of(stack, "e2e-resources", "CreateContainer", pod) == "ok"

    pid = clean_pods.container_pid(container_id)
    env = environ_after_exec(pid)
    assert env.get("TEAM") == "payments", f"env of pid {pid}: {sorted(env)}"
    assert env.get(resource_policy.ENV_KEY) == resource_policy.ENV_VALUE, sorted(env)
    assert env.get("E2E_BASE") == "1"  # the CRI request's own env survives
    values = cgroup_values(pid)
    assert values.cpu_shares == resource_policy.shares_for(milli_cpu) == 307, values
    assert quota(pid) == resource_policy.quota_for(milli_cpu) == 30000
    assert int(cgroup_file(pid, "cpu", "cpu.cfs_period_us")) == 100000
    assert values.memory_limit_bytes == memory_mib * MIB, values
    assert values.cpuset_cpus == BASE_CPUSET  # nobody decided a cpuset

    # Control: a pod without the label and annotations gets nothing from either policy.
    plain_pod = clean_pods.run_pod("http-policy-plain")
    plain = clean_pods.run_container(plain_pod)
    assert outcome_of(stack, "e2e-resources", "CreateContainer", plain_pod) == "no_change"
    plain_pid = clean_pods.container_pid(plain)
    plain_env = environ_after_exec(plain_pid)
    assert "TEAM" not in plain_env and resource_policy.ENV_KEY not in plain_env
    plain_values = cgroup_values(plain_pid)
    assert plain_values.cpu_shares == BASE_CPU_SHARES, plain_values
    assert plain_values.memory_limit_bytes == BASE_MEMORY_BYTES, plain_values
    assert quota(plain_pid) == -1


# --- issue 4: the koordinator-qos bundle ------------------------------------------------------


def koordinator_stack(start_stack: StackFactory, ls_pool: str = "0-1") -> Stack:
    return start_stack(webhooks=[KOORDINATOR_WEBHOOK], rules=koordinator_rules(ls_pool))


def test_koordinator_lsr_pinned_cpuset_and_unlimited_quota(
    clean_pods: CriClient, start_stack: StackFactory
) -> None:
    stack = koordinator_stack(start_stack)
    pod = clean_pods.run_pod(
        "lsr",
        labels={QOS_LABEL: "LSR"},
        annotations={RESOURCE_STATUS: json.dumps({"cpuset": "1"})},
    )
    # The container asks for a CFS quota itself, so quota -1 can only come from the policy.
    container_id = clean_pods.run_container(
        pod, resources={"cpu_quota": 100000, "cpu_period": 100000}
    )
    assert outcome_of(stack, "koordinator-qos", "CreateContainer", pod) == "ok"
    pid = clean_pods.container_pid(container_id)
    assert cgroup_values(pid).cpuset_cpus == "1"
    assert quota(pid) == -1

    # kubelet later re-applies the pod spec's resources (UpdateContainerResources); the
    # policy's UpdateContainer answer keeps the pinning.
    clean_pods.update_resources(
        container_id,
        cpu_shares=BASE_CPU_SHARES,
        cpu_quota=100000,
        cpu_period=100000,
        cpuset_cpus=BASE_CPUSET,
        memory_limit_in_bytes=BASE_MEMORY_BYTES,
    )
    assert outcome_of(stack, "koordinator-qos", "UpdateContainer", pod) == "ok"
    assert cgroup_values(pid).cpuset_cpus == "1"
    assert quota(pid) == -1


def test_koordinator_be_batch_resources(clean_pods: CriClient, start_stack: StackFactory) -> None:
    stack = koordinator_stack(start_stack)
    request_milli, limit_milli, memory = 500, 1000, 192 * MIB
    spec = {
        "containers": {
            "app": {
                "requests": {BATCH_CPU: str(request_milli), BATCH_MEMORY: "192Mi"},
                "limits": {BATCH_CPU: str(limit_milli), BATCH_MEMORY: "192Mi"},
            }
        }
    }
    pod = clean_pods.run_pod(
        "be", labels={QOS_LABEL: "BE"}, annotations={EXTENDED_RESOURCE_SPEC: json.dumps(spec)}
    )
    container_id = clean_pods.run_container(pod, name="app")
    assert outcome_of(stack, "koordinator-qos", "CreateContainer", pod) == "ok"
    pid = clean_pods.container_pid(container_id)
    values = cgroup_values(pid)
    # No normalization ratio configured, so no quota scaling.
    assert values.cpu_shares == milli_cpu_to_shares(request_milli) == 512, values
    assert quota(pid) == milli_cpu_to_quota(limit_milli) == 100000
    assert values.memory_limit_bytes == memory_limit(memory) == 201326592, values
    # koordlet "clears" a BE pod's cpuset; an empty cpuset is a no-op in NRI.
    assert values.cpuset_cpus == BASE_CPUSET, values


def test_koordinator_gpu_env_inject(clean_pods: CriClient, start_stack: StackFactory) -> None:
    stack = koordinator_stack(start_stack)
    allocated = {
        "gpu": [
            {"minor": 0, "resources": {"koordinator.sh/gpu-core": "100",
                                       "koordinator.sh/gpu-memory-ratio": "100"}},
            {"minor": 1, "resources": {"koordinator.sh/gpu-core": "100",
                                       "koordinator.sh/gpu-memory-ratio": "100"}},
        ]
    }  # fmt: skip
    pod = clean_pods.run_pod(
        "gpu", labels={QOS_LABEL: "LS"}, annotations={DEVICE_ALLOCATED: json.dumps(allocated)}
    )
    # The allocation is pod-level: every container of the pod gets the env.
    for name in ("app", "sidecar"):
        # The device plugin passed GPUs 0 and 1 (kubelet's allocation backs the annotation).
        container_id = clean_pods.run_container(pod, name=name,
                                                env={"NVIDIA_VISIBLE_DEVICES": "0,1"})
        assert outcome_of(stack, "koordinator-qos", "CreateContainer", pod, name) == "ok"
        env = environ_after_exec(clean_pods.container_pid(container_id))
        assert env.get("NVIDIA_VISIBLE_DEVICES") == "0,1", f"{name}: {sorted(env)}"
        assert env.get("E2E_BASE") == "1"


def test_koordinator_rule_change_updates_running_container(
    containerd: Containerd, clean_pods: CriClient, start_stack: StackFactory
) -> None:
    """Rules file rewritten → policy server recomputes from the bridge's /v1/state and
    POSTs /v1/updates → bridge → CRI UpdateContainerResources (never NRI UpdateContainers:
    both containerds here can deadlock on it) → containerd's own UpdateContainer event and
    the cgroup rewritten."""
    stack = koordinator_stack(start_stack, ls_pool="0-1")
    pod = clean_pods.run_pod("ls", labels={QOS_LABEL: "LS"})
    # Own cpuset 0, so the share pool 0-1 at creation is visibly the policy's.
    container_id = clean_pods.run_container(pod, resources={"cpuset_cpus": "0"})
    assert outcome_of(stack, "koordinator-qos", "CreateContainer", pod) == "ok"
    pid = clean_pods.container_pid(container_id)
    assert cgroup_values(pid).cpuset_cpus == "0-1"
    generation = stack.policy.get("/v1/rules")["generation"]

    offset = containerd.log_size()
    stack.policy.write_rules(koordinator_rules(ls_pool="1"))
    wait_until(lambda: cgroup_values(pid).cpuset_cpus == "1",
               what="cpuset.cpus 1 after the rule change", timeout_s=RULE_CHANGE_TIMEOUT_S,
               interval_s=0.1, details=lambda: (
                   f"cpuset.cpus {cgroup_values(pid).cpuset_cpus!r}\n"
                   f"--- policy server log:\n{stack.policy.tail()}\n"
                   f"--- bridge log:\n{stack.bridge.tail()}"))

    rules = stack.policy.get("/v1/rules")
    assert rules["generation"] > generation and not rules.get("last_error"), rules
    # Not restarted: the same container, the same process, still running.
    assert clean_pods.container_pid(container_id) == pid
    sent = stack.bridge.wait_for("unsolicited update", has_msg("unsolicited updates sent"))
    assert sent.get("failed") == 0, sent
    # ... through CRI: containerd ran its own UpdateContainer event through the bridge, and
    # no plugin-initiated UpdateContainers reached it (containerd logs each one).
    assert sent.get("route") == "CRI UpdateContainerResources", sent
    assert outcome_of(stack, "koordinator-qos", "UpdateContainer", pod) in ("ok", "no_change")
    requested = f'plugin \\"{PLUGIN_INDEX}-{PLUGIN_NAME}\\" requested container updates'
    assert requested not in containerd.log_since(offset), containerd.log_tail()
    # The bridge's view follows the runtime's.
    state = {c["id"]: c for c in stack.bridge.state()["containers"]}
    cpu = state[container_id].get("linux", {}).get("resources", {}).get("cpu", {})
    assert cpu.get("cpus") == "1", state[container_id]


def test_koordinator_repolicies_containers_created_while_the_bridge_was_away(
    containerd: Containerd, clean_pods: CriClient, start_stack: StackFactory
) -> None:
    """A BE container created while the bridge is frozen gets no policy (NRI is fail-open:
    containerd drops the silent plugin). The bridge reconnects by itself, and the
    Synchronize that follows brings the container to the policy, whose updates containerd
    applies to the running container (issue 13)."""
    stack = koordinator_stack(start_stack)
    bridge_pid = stack.bridge.pid
    assert bridge_pid is not None
    registrations = sum(1 for line in stack.bridge.lines() if line.get("msg") == "registered")
    request_milli, limit_milli = 500, 1000
    spec = {"containers": {"app": {
        "requests": {BATCH_CPU: str(request_milli), BATCH_MEMORY: "192Mi"},
        "limits": {BATCH_CPU: str(limit_milli), BATCH_MEMORY: "192Mi"}}}}  # fmt: skip
    os.kill(bridge_pid, signal.SIGSTOP)
    try:
        pod = clean_pods.run_pod(
            "be-away", labels={QOS_LABEL: "BE"},
            annotations={EXTENDED_RESOURCE_SPEC: json.dumps(spec)},
        )
        container_id = clean_pods.run_container(pod, name="app")
        pid = clean_pods.container_pid(container_id)
        assert cgroup_values(pid).cpu_shares == BASE_CPU_SHARES  # created without policy
    finally:
        os.kill(bridge_pid, signal.SIGCONT)
    stack.bridge.wait_for(
        "re-registration",
        lambda _: sum(1 for x in stack.bridge.lines() if x.get("msg") == "registered")
        > registrations,
        timeout_s=30,
    )
    wait_until(lambda: cgroup_values(pid).cpu_shares == milli_cpu_to_shares(request_milli),
               what="cpu.shares restored after the reconnect", timeout_s=RULE_CHANGE_TIMEOUT_S,
               interval_s=0.1, details=lambda: (
                   f"cpu.shares {cgroup_values(pid).cpu_shares}\n"
                   f"--- bridge log:\n{stack.bridge.tail()}"))
    assert quota(pid) == milli_cpu_to_quota(limit_milli) == 100000
    assert cgroup_values(pid).memory_limit_bytes == 192 * MIB
    assert clean_pods.container_pid(container_id) == pid  # the same running container
