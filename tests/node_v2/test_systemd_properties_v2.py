"""Issue 24 finding 2: systemd keeps the policy's pod slice values (cgroup v2, systemd driver).

With the systemd cgroup driver each pod slice is a systemd unit, and systemd writes the unit's
own properties back into the slice's files whenever it re-applies it: removing one pod's
container reset that pod's slice and another pod's LSR slice to kubelet's values, and they
stayed wrong until the reconciler's next pass. The policy server now sets the values as the
slices' unit properties too (SetUnitProperties over the system bus, as kubelet does), so what
systemd puts back is the policy's.

Two pods with koordinator-qos pod-level values (an LSR pod: ``cpu.max`` max where kubelet's
slice said 0.5 CPU; a BE pod: the batch ``cpu.weight``, ``cpu.max`` and ``memory.max`` where
kubelet's slice said weight 1), the reconciler off (``--reconcile-interval 0``: only the
start-up pass, before the pods), then what happens on a node anyway: containers go and come,
another pod starts, ``daemon-reload``, kubelet's periodic QoS update (SetUnitProperties on
``kubepods-besteffort.slice``). Without the properties (``--systemd-properties off``, as on
main before this test) two of these steps reset slices on this guest (systemd 257): kubelet's
QoS update put the LSR pod's slice back to ``50000 100000``, and removing the BE pod's last
container put its slice back to weight 1, ``max``, ``max``. Both slices must hold the policy's
values after every step, in the files and in the units' properties.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import StackFactory, outcome_of
from tests.e2e.containerd import Containerd
from tests.e2e.cri import CriClient
from tests.e2e.procs import scaled
from tests.e2e.test_node_effects import NODE_WEBHOOK, policy_log
from tests.e2e.test_policies import (
    BATCH_CPU,
    BATCH_MEMORY,
    EXTENDED_RESOURCE_SPEC,
    MIB,
    QOS_LABEL,
    RESOURCE_STATUS,
    koordinator_rules,
    milli_cpu_to_quota,
    milli_cpu_to_shares,
)

from . import guest_node
from .guest_node import read

pytestmark = pytest.mark.node_v2
NODE_V2_WEIGHT = 14  # run-guest.sh's split: seconds in a guest / 10

# What kubelet put on the slices before the sandboxes ran, and what the policy wants instead.
KUBELET_LSR_QUOTA_PER_SEC_US = 500_000  # 0.5 CPU: cpu.max "50000 100000"
KUBELET_BE_WEIGHT = 1  # BestEffort: shares 2
BE_SPEC = {"containers": {
    "app": {"requests": {BATCH_CPU: "300", BATCH_MEMORY: "128Mi"},
            "limits": {BATCH_CPU: "600", BATCH_MEMORY: "128Mi"}},
    "sidecar": {"requests": {BATCH_CPU: "200", BATCH_MEMORY: "64Mi"},
                "limits": {BATCH_CPU: "400", BATCH_MEMORY: "64Mi"}},
}}  # fmt: skip
# How long the values must hold after each step (before TIME_SCALE): systemd re-applies a
# slice while it handles the step, so a reset shows within this.
HOLD_S = 0.5


def unit_show(unit: str, *props: str) -> dict[str, str]:
    """``systemctl show`` of ``unit``'s properties (a round trip through systemd's loop too)."""
    out = subprocess.run(
        ["systemctl", "show", unit, *(f"--property={p}" for p in props)],
        check=True, capture_output=True, text=True, timeout=scaled(30),
    ).stdout  # fmt: skip
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def slice_values(directory: Path) -> dict[str, str]:
    return {name: read(directory, name) for name in ("cpu.weight", "cpu.max", "memory.max")}


def assert_holds(wanted: dict[Path, dict[str, str]], after: str) -> None:
    """Each slice's files hold ``wanted`` now and for HOLD_S (scaled) longer."""
    unit_show("kubepods.slice", "Id")  # systemd has handled what came before this
    deadline = time.monotonic() + scaled(HOLD_S)
    while True:
        for directory, values in wanted.items():
            got = {k: v for k, v in slice_values(directory).items() if k in values}
            assert got == values, f"{directory.name} after {after}: {got}, want {values}"
        if time.monotonic() > deadline:
            return
        time.sleep(0.2)


def test_systemd_keeps_the_policys_pod_slice_values(
    containerd: Containerd, clean_pods: CriClient, start_stack: StackFactory, tmp_path: Path
) -> None:
    resctrl = tmp_path / "resctrl"
    (resctrl / "info" / "L3").mkdir(parents=True)
    (resctrl / "info" / "L3" / "cbm_mask").write_text("7ff\n")
    (resctrl / "schemata").write_text("L3:0=7ff\n")
    # kubelet's QoS slices exist before the policy server starts, as on a node.
    guest_node.ensure_qos_slices()
    # Said, not learned: learning the runtime's conversion takes a reconciler pass.
    formula = "quadratic" if containerd.runtime.runc == guest_node.RUNC_1_3 else "linear"
    stack = start_stack(
        webhooks=[NODE_WEBHOOK],
        rules=koordinator_rules(),
        policy_args=("--reconcile-interval", "0", "--cpu-weight-formula", formula,
                     "--resctrl-root", str(resctrl)),
    )  # fmt: skip
    units = stack.policy.get("/v1/state")["node_effects"]["systemd_properties"]
    assert units["state"] == "working" and units["systemd_driver"] is True, units

    lsr = guest_node.run_pod(
        clean_pods, "lsr", "guaranteed", cpu_quota_per_sec_us=KUBELET_LSR_QUOTA_PER_SEC_US,
        labels={QOS_LABEL: "LSR"}, annotations={RESOURCE_STATUS: json.dumps({"cpuset": "1"})})
    lsr_container = clean_pods.run_container(
        lsr.pod, resources={"cpu_quota": 100000, "cpu_period": 100000})  # fmt: skip
    assert outcome_of(stack, "koordinator-qos", "CreateContainer", lsr.pod) == "ok"
    be = guest_node.run_pod(clean_pods, "be", "besteffort", cpu_weight=KUBELET_BE_WEIGHT,
                            labels={QOS_LABEL: "BE"},
                            annotations={EXTENDED_RESOURCE_SPEC: json.dumps(BE_SPEC)})
    be_container = clean_pods.run_container(be.pod, name="app")
    assert outcome_of(stack, "koordinator-qos", "CreateContainer", be.pod) == "ok"  # fmt: skip

    be_weight = guest_node.runc_weight(containerd.runtime.runc, milli_cpu_to_shares(500))
    assert be_weight != KUBELET_BE_WEIGHT
    wanted = {
        lsr.directory: {"cpu.max": "max 100000"},
        be.directory: {
            "cpu.weight": str(be_weight),
            "cpu.max": f"{milli_cpu_to_quota(1000)} 100000",
            "memory.max": str(192 * MIB),
        },
    }
    assert_holds(wanted, "the policy's writes")
    # The units carry the same values: what systemd re-applies.
    assert unit_show(lsr.unit, "CPUQuotaPerSecUSec")["CPUQuotaPerSecUSec"] == "infinity"
    be_props = unit_show(be.unit, "CPUWeight", "CPUQuotaPerSecUSec", "MemoryMax")
    assert be_props == {
        "CPUWeight": str(be_weight),
        "CPUQuotaPerSecUSec": "1s",  # 1000 milli-CPU: 10^6 us per second
        "MemoryMax": str(192 * MIB),
    }, be_props

    # What a node does anyway; systemd re-applies slices at some of these steps.
    clean_pods.stop_container(be_container)
    clean_pods.remove_container(be_container)
    assert_holds(wanted, "removing the BE pod's container")
    sidecar = clean_pods.run_container(be.pod, name="sidecar")
    assert_holds(wanted, "a new container in the BE pod")
    clean_pods.stop_container(lsr_container)
    clean_pods.remove_container(lsr_container)
    assert_holds(wanted, "removing the LSR pod's container")
    other = guest_node.run_pod(clean_pods, "other", "burstable", cpu_weight=50)
    clean_pods.run_container(other.pod, name="app")
    assert_holds(wanted, "another pod starting")
    subprocess.run(["systemctl", "daemon-reload"], check=True, timeout=scaled(60))
    assert_holds(wanted, "systemctl daemon-reload")
    # kubelet's QoS update (UpdateQOSCgroups, every minute): runc's SetUnitProperties on the
    # QoS slices. Without the properties this put the LSR slice back to kubelet's 0.5 CPU.
    subprocess.run(["systemctl", "set-property", "--runtime", "kubepods-besteffort.slice",
                    f"CPUWeight={KUBELET_BE_WEIGHT}"], check=True, timeout=scaled(60))
    assert_holds(wanted, "kubelet's QoS slice update")
    # Without the properties this put the BE slice back to kubelet's values.
    clean_pods.stop_container(sidecar)
    clean_pods.remove_container(sidecar)
    assert_holds(wanted, "removing the BE pod's last container")
    clean_pods.stop_pod(other.pod.id)
    assert_holds(wanted, "stopping the other pod")

    metrics = stack.policy.get_text("/metrics")
    assert 'policy_systemd_unit_property_calls_total{result="ok"}' in metrics
    assert 'policy_systemd_unit_property_calls_total{result="failed"}' not in metrics
    logs = policy_log(stack)()
    assert "Traceback" not in logs and "systemd unit properties cannot be set" not in logs, logs
