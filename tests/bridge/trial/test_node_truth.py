"""Node truth in `try` (issue 45.1): the private policy server and the bridge see the simulated
node (`--node-cpus`, `--node-numa-nodes`), not the machine the trial runs on.

- rules naming CPUs the node does not have: the server refuses them at load, `try` exits 2
  naming the key;
- a reply whose cpuset lies outside the node: the bridge refuses it as a failed call (exit 3);
- the example rules and every shipped rules file: every container starts on 2 and 64 CPUs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from .conftest import REPO, run_try

pytestmark = pytest.mark.processes  # starts processes: not in make check

PODS = sorted(str(p) for p in (REPO / "examples" / "pods").glob("*.yaml"))
LSR_POD = str(REPO / "examples" / "pods" / "lsr-pod.yaml")
SHARED = "node.koordinator.sh/cpu-shared-pools"
SIXTEEN_CPU_RULES = {"topology": {SHARED: [{"socket": 0, "node": 0, "cpuset": "0-7"},
                                          {"socket": 1, "node": 1, "cpuset": "8-15"}]}}
PINNING_POLICY = '''
from policy_server import Adjustment, Decision, Event, EventName, Policy, ResourcePatch

policy = Policy("pin-all", description="pins every container to CPUs 0-15")


@policy.on(EventName.CREATE_CONTAINER)
def pin(event: Event) -> Decision:
    return Decision(adjust=Adjustment(resources=ResourcePatch(cpu_cpus="0-15")))
'''
# Every koordinator rules file the project ships: the example, the systemd units' and each
# kustomize base, overlay and component's (found, so a new overlay's rules are covered too).
SHIPPED_RULES = ("examples/koordinator-rules.yaml", "deploy/systemd/rules.yaml",
                 *sorted(str(p.relative_to(REPO))
                         for p in (REPO / "deploy" / "kubernetes").rglob("rules.yaml")))


def test_every_kustomize_rules_file_is_among_the_shipped() -> None:
    assert {"deploy/kubernetes/base/rules.yaml", "deploy/kubernetes/overlays/production/rules.yaml",
            "deploy/kubernetes/components/node-effects/rules.yaml"} <= set(SHIPPED_RULES)


def test_a_16_cpu_rules_file_is_refused_on_a_2_cpu_node(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump(SIXTEEN_CPU_RULES))
    done = run_try(LSR_POD, "--rules", str(rules), "--node-cpus", "2")
    assert done.returncode == 2, done.stderr
    assert f"topology.{SHARED}[0].cpuset: '0-7' names CPUs 2-7 the node does not have" \
        in done.stderr
    fits = run_try(LSR_POD, "--rules", str(rules), "--node-cpus", "16", "--node-numa-nodes", "2")
    assert fits.returncode == 0, fits.stderr
    one_numa_node = run_try(LSR_POD, "--rules", str(rules), "--node-cpus", "16")
    assert one_numa_node.returncode == 2
    assert f"topology.{SHARED}[1].node" in one_numa_node.stderr


def test_a_reply_with_an_out_of_node_cpuset_is_a_failed_call(tmp_path: Path) -> None:
    module = tmp_path / "pin_all.py"
    module.write_text(PINNING_POLICY)
    done = run_try(LSR_POD, "--policy-module", str(module), "--node-cpus", "2")
    assert done.returncode == 3, done.stderr
    assert ("adjust.linux.resources.cpu.cpus: '0-15' names CPUs 2-15 the node does not have "
            "(online: 0-1)") in done.stderr
    fits = run_try(LSR_POD, "--policy-module", str(module), "--node-cpus", "16")
    assert fits.returncode == 0, fits.stderr


@pytest.mark.parametrize("cpus", ["2", "64"])
@pytest.mark.parametrize("rules", SHIPPED_RULES)
def test_shipped_rules_start_every_container(rules: str, cpus: str) -> None:
    done = run_try(*PODS, "--rules", str(REPO / rules), "--node-cpus", cpus)
    assert done.returncode == 0, done.stderr
    assert "call failed" not in done.stderr
