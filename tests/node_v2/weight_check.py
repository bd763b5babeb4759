"""Issue 24 finding 3 on a real node: the policy server follows the node runtime's
shares -> cpu.weight conversion (runc 1.1: linear, runc 1.3: quadratic), and a settled node
shows no container weight drift and pushes no updates."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.e2e.conftest import StackFactory, outcome_of
from tests.e2e.containerd import Containerd
from tests.e2e.cri import CriClient
from tests.e2e.procs import scaled
from tests.e2e.test_policies import (
    BATCH_CPU,
    BATCH_MEMORY,
    EXTENDED_RESOURCE_SPEC,
    QOS_LABEL,
    koordinator_rules,
    milli_cpu_to_shares,
)
from tests.waiting import wait_until

from . import guest_node
from .guest_node import cgroup_dir, read
from .test_koordinator_v2 import start_node_stack


def metric(text: str, name: str, labels: str = "") -> float:
    pattern = re.escape(name) + (re.escape("{" + labels + "}") if labels else r"(\{[^}]*\})?")
    total = 0.0
    for line in text.splitlines():
        if re.match(pattern + r" ", line):
            total += float(line.rsplit(" ", 1)[1])
    return total


def check_weights_follow_the_runtime(
    containerd: Containerd, cri: CriClient, start_stack: StackFactory, tmp_path: Path,
    want_formula: str,
) -> None:
    stack = start_node_stack(start_stack, tmp_path, koordinator_rules())
    runc = containerd.runtime.runc
    pods = []
    for milli in (500, 2000):  # shares 512 and 2048: the two formulas disagree on both
        spec = {"containers": {"app": {"requests": {BATCH_CPU: str(milli), BATCH_MEMORY: "64Mi"},
                                       "limits": {BATCH_CPU: str(milli), BATCH_MEMORY: "64Mi"}}}}
        pod = guest_node.run_pod(cri, f"weight-{milli}", "besteffort", labels={QOS_LABEL: "BE"},
                                 annotations={EXTENDED_RESOURCE_SPEC: json.dumps(spec)})
        container_id = cri.run_container(pod.pod, name="app")
        assert outcome_of(stack, "koordinator-qos", "CreateContainer", pod.pod) == "ok"
        shares = milli_cpu_to_shares(milli)
        scope = cgroup_dir(cri.container_pid(container_id))
        assert read(scope, "cpu.weight") == str(guest_node.runc_weight(runc, shares))
        pods.append((pod, shares))

    def weight() -> dict[str, object]:
        state = stack.policy.get("/v1/state")
        got: dict[str, object] = state["node_effects"]["cgroups"]["cpu_weight"]
        return got
    wait_until(lambda: weight().get("formula") == want_formula,
               what=f"the {want_formula} formula is learned", timeout_s=scaled(30), interval_s=0.5,
               details=lambda: str(weight()))
    # The pod slices carry the pods' weights in the runtime's conversion too.
    for pod, shares in pods:
        want = str(guest_node.runc_weight(runc, shares))
        guest_node.wait_value(pod.directory, "cpu.weight", want)

    # Settled: two more passes find no container drift and push nothing.
    before = stack.policy.get_text("/metrics")
    passes = "policy_reconcile_pass_seconds_count"
    wait_until(lambda: metric(stack.policy.get_text("/metrics"), passes)
               >= metric(before, passes) + 2,
               what="two more reconciler passes", timeout_s=scaled(30), interval_s=0.5)
    after = stack.policy.get_text("/metrics")
    for name in ("policy_reconcile_drift_found_total", "policy_pushed_updates_total"):
        assert metric(after, name) == metric(before, name), (name, before, after)
