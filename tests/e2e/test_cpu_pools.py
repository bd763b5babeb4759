"""cpu-pools on real containerd (1.7.24 and 2.1.9): exclusive CPUs and a shared pool that moves.

The whole chain as separate processes (``nri-policy-server --policy cpu-pools=FILE``, the
bridge with a cpu-pools webhook and a control socket, a private containerd driven through
CRI). Every assertion is on the kernel's cgroup files of the real container processes, and the
shared containers are checked to be the *same* processes (same pids) before and after each move.

This machine has 2 CPUs. The topology comes from the real /sys/devices/system/cpu, CPU 0 is
reserved (it always stays in the shared pool, as kubelet's reserved CPUs do), so one exclusive
container fits at a time next to a non-empty shared pool (an empty cpuset cannot hold a
process). Two exclusive containers are pinned one after the other, a third request that does
not fit is refused with the reason in the CRI error, and the policy server is restarted twice:
once with nothing changed (the allocation is rebuilt and still refuses the request), once
after an exclusive container went away while it was down (the rebuilt state grows the shared
pool through the bridge's POST /v1/updates).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import grpc
import pytest

from tests.waiting import wait_until

from .bridge_proc import has_msg
from .conftest import StackFactory
from .containerd import Containerd
from .cri import CriClient, Pod
from .inspect_proc import cgroup_values
from .policy_proc import PolicyServer

pytestmark = pytest.mark.e2e

MOVE_TIMEOUT_S = 15.0
ALL_CPUS = Path("/sys/devices/system/cpu/online").read_text().strip()
WEBHOOK = {
    "name": "cpu-pools",
    "events": ["Synchronize", "CreateContainer", "UpdateContainer", "StopContainer",
               "RemoveContainer", "RemovePodSandbox"],
    "timeout": "1s",
    # Ignore: while the policy server is down (this test stops it on purpose) containers are
    # still stopped and removed. A refusal is the policy's answer and fails the container anyway.
    "failure_policy": "Ignore",
}  # fmt: skip
CONFIG = {"reserved_cpus": "0"}
GUARANTEED_1_CPU = {"cpu_shares": 1024, "cpu_quota": 100000, "cpu_period": 100000}


def restart(policy: PolicyServer) -> None:
    """Stop and start the policy server; return once its startup resync has run."""
    resyncs = policy.raw_log().count("resync policy=cpu-pools")
    policy.stop()
    policy.start()
    policy.wait_healthy()
    # The startup resync: state rebuilt from the bridge's GET /v1/state.
    wait_until(lambda: policy.raw_log().count("resync policy=cpu-pools") != resyncs,
               what="a resync after the restart", timeout_s=MOVE_TIMEOUT_S,
               details=policy.tail)


def cpuset(pid: int) -> str:
    return cgroup_values(pid).cpuset_cpus


def wait_cpusets(pids: dict[str, int], expected: str, what: str, stack_logs: str = "") -> None:
    """Until every process's cpuset.cpus is ``expected`` (updates land after the reply)."""
    def seen() -> dict[str, str]:
        return {name: cpuset(pid) for name, pid in pids.items()}
    wait_until(lambda: seen() == dict.fromkeys(pids, expected),
               what=f"{what}: every cpuset {expected}", timeout_s=MOVE_TIMEOUT_S,
               interval_s=0.1, details=lambda: f"cpusets {seen()}\n{stack_logs}")


def refused(cri: CriClient, pod: Pod, name: str) -> str:
    with pytest.raises(grpc.RpcError) as info:
        cri.create_container(pod, name=name, resources=GUARANTEED_1_CPU)
    return str(info.value.details())


def test_exclusive_cpus_move_the_shared_pool_and_survive_restarts(
    containerd: Containerd, clean_pods: CriClient, start_stack: StackFactory
) -> None:
    config = (
        Path(tempfile.mkdtemp(prefix="cpu-pools-", dir=containerd.dirs.base)) / "cpu-pools.yaml"
    )
    config.write_text(json.dumps(CONFIG) + "\n")
    stack = start_stack(
        webhooks=[WEBHOOK], koordinator=False, builtin_policies=(f"cpu-pools={config}",)
    )
    policy, bridge, cri = stack.policy, stack.bridge, clean_pods

    def logs() -> str:
        return f"--- policy:\n{policy.tail()}\n--- bridge:\n{bridge.tail()}"

    # Two shared containers. They ask for CPU 1 themselves: the whole node is the policy's.
    shared_pod = cri.run_pod("shared")
    shared = {n: cri.run_container(shared_pod, n, {"cpuset_cpus": "1"}) for n in ("s1", "s2")}
    pids = {n: cri.container_pid(cid) for n, cid in shared.items()}
    wait_cpusets(pids, ALL_CPUS, "shared containers at start", logs())

    # 1st exclusive container: CPU 1 (CPU 0 is reserved); the shared ones shrink to CPU 0.
    x1_pod = cri.run_pod("exclusive-1")
    x1 = cri.run_container(x1_pod, "x1", GUARANTEED_1_CPU)
    assert cpuset(cri.container_pid(x1)) == "1"
    wait_cpusets(pids, "0", "shared after pinning x1", logs())

    # No CPU left for a 2nd one: refused, with the policy's reason in the CRI error.
    x2_pod = cri.run_pod("exclusive-2")
    reason = refused(cri, x2_pod, "x2")
    assert "cpu-pools: needs 1 exclusive CPUs, 0 can be given" in reason, reason

    # Restart: the allocation is rebuilt from the bridge's state, so CPU 1 is still x1's.
    restart(policy)
    reason = refused(cri, x2_pod, "x2-again")
    assert "0 can be given" in reason, reason  # not "no Synchronize": the state is there
    assert {n: cpuset(pid) for n, pid in pids.items()} == {"s1": "0", "s2": "0"}

    # x1 goes away while the policy server is down; on restart the rebuilt state has a
    # bigger shared pool and pushes it through the bridge (POST /v1/updates).
    policy.stop()
    cri.stop_container(x1)
    cri.remove_container(x1)
    policy.start()
    policy.wait_healthy()
    wait_cpusets(pids, ALL_CPUS, "shared after x1 left while the policy was down", logs())
    sent = bridge.wait_for("pushed updates", has_msg("unsolicited updates sent"))
    assert sent.get("failed") == 0, sent

    # 2nd exclusive container now fits; the shared ones shrink again.
    x2 = cri.run_container(x2_pod, "x2-fits", GUARANTEED_1_CPU)
    assert cpuset(cri.container_pid(x2)) == "1"
    wait_cpusets(pids, "0", "shared after pinning x2", logs())

    # Removing it (StopContainer's reply carries the updates) grows them back.
    cri.stop_container(x2)
    cri.remove_container(x2)
    wait_cpusets(pids, ALL_CPUS, "shared after x2 left", logs())

    # The same processes all along: moved, never restarted.
    assert {n: cri.container_pid(cid) for n, cid in shared.items()} == pids
