"""Issue 32: unsolicited container updates must not wedge containerd (1.7.24 and 2.1.9).

The bridge delivers updates nobody asked for in an event (its control API's POST /v1/updates,
and through it a policy's pushes). On containerd's NRI, an ``UpdateContainers`` from a plugin
takes the runtime's NRI locks in the opposite order from every CRI call and container exit
(tests/e2e/cri_churn.py has the two orders), so under churn the two can wait for each other
for good: every CRI call that reaches NRI then hangs until containerd is restarted.

This drives that race as hard as a 2-core machine allows, for NRI_E2E_CHURN_S seconds: five
long-running containers get cpu shares through back-to-back POST /v1/updates; several CRI
workers run pods through their whole life (create, start, update, stop, remove, and a
container that exits on its own); one worker creates a Guaranteed container that cpu-pools
pins to an exclusive CPU, whose removal makes the policy push the grown shared pool to every
other container through the bridge. A call that has not returned after HANG_S fails the test,
with containerd's goroutine dump; then that containerd is killed, so the clean-up runs.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

from .conftest import StackFactory
from .containerd import Containerd
from .cri import CriClient
from .cri_churn import HANG_S, JOIN_TIMEOUT_S, Call, Churn, percentiles
from .goroutine_dump import DUMP_TIMEOUT_S, dump_goroutines
from .private_containerd import LOG_DIR
from .procs import scaled
from .test_cpu_pools import CONFIG, GUARANTEED_1_CPU

pytestmark = pytest.mark.e2e

# The churn's length; the 10-minute soak of docs/e2e.md sets NRI_E2E_CHURN_S=600.
CHURN_S = float(os.environ.get("NRI_E2E_CHURN_S", "45"))
POD_WORKERS = 4
UPDATE_LOOPS = 2
QUIET_UPDATES = 40  # before the churn: the update latency on a quiet node (docs/e2e.md)
STEADY_CONTAINERS = 5
# containerd and stack start-up, the steady pod, a hang's dump, joining the workers, clean-up.
TIMEOUT_S = CHURN_S + HANG_S + DUMP_TIMEOUT_S + JOIN_TIMEOUT_S + scaled(90.0)
WEBHOOK = {
    "name": "cpu-pools",
    # Without StopContainer: the policy releases an exclusive CPU at RemoveContainer, whose
    # reply cannot carry updates, so it pushes them through the bridge (Decision.push).
    "events": ["Synchronize", "CreateContainer", "UpdateContainer", "RemoveContainer",
               "RemovePodSandbox"],
    "timeout": "1s",
    # A slow answer under this load must not fail a container: hangs are what is tested.
    "failure_policy": "Ignore",
}  # fmt: skip
PUSHED = "updates through the bridge"  # the policy server's line per delivered push


def describe(calls: list[Call]) -> str:
    return "\n".join(f"  {call}" for call in calls)


@pytest.mark.timeout(TIMEOUT_S)
def test_cri_calls_return_while_updates_are_delivered(
    containerd: Containerd, cri: CriClient, start_stack: StackFactory
) -> None:
    version = containerd.runtime.version
    config = Path(tempfile.mkdtemp(prefix="cpu-pools-", dir=containerd.dirs.base)) / "pools.yaml"
    config.write_text(json.dumps(CONFIG) + "\n")
    stack = start_stack(
        webhooks=[WEBHOOK], koordinator=False, builtin_policies=(f"cpu-pools={config}",)
    )
    steady_pod = cri.run_pod("steady")
    steady = [cri.run_container(steady_pod, f"steady-{i}") for i in range(STEADY_CONTAINERS)]

    churn = Churn(cri, stack.bridge.control_socket, steady, GUARANTEED_1_CPU)
    quiet = churn.quiet_round_trips(QUIET_UPDATES)
    print(f"containerd {version}: quiet node, {QUIET_UPDATES} updates one after another: "
          f"round trip {percentiles(quiet)}")
    churn.start(pod_workers=POD_WORKERS, update_loops=UPDATE_LOOPS)
    hung = churn.run(CHURN_S)
    dump_text = ""
    if hung:
        stem = f"test_update_deadlock-containerd-{version}"
        try:
            dump_text = dump_goroutines(containerd, LOG_DIR / f"{stem}.stacks.log").excerpt()
        except AssertionError as exc:  # the failure below still says what hung
            dump_text = f"no goroutine dump: {exc}"
        containerd.kill()  # wedged: nothing else would end the calls waiting on it
    stuck = churn.finish()

    report = f"containerd {version}: {churn.report(stack.policy.raw_log().count(PUSHED))}"
    print(report)
    if hung:
        pytest.fail(f"{report}\nno answer within {HANG_S:g} s; calls in flight:\n"
                    f"{describe(hung)}\n{dump_text}\n(containerd was killed after the dump)",
                    pytrace=False)
    tally = churn.tally
    if stuck or tally.errors:
        shown = "\n".join(tally.errors[:10])
        pytest.fail(f"{report}\nworker threads still running: {stuck}\n"
                    f"CRI errors (the first 10):\n{shown}", pytrace=False)
    # The paths under test ran: the churn, the control API and the policy's pushes.
    assert tally.pod_cycles and tally.exclusive_cycles and tally.updates_sent, report
    assert PUSHED in stack.policy.raw_log(), report
