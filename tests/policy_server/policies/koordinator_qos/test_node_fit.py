"""Rules naming CPUs or NUMA nodes the node does not have are refused at load and on reload,
naming the key (issue 45.1: a 16-CPU example broke every pinned container on a 2-CPU node)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from policy_server.policies.koordinator_qos.wiring import KoordinatorQoS
from policy_server.sdk import NodeFacts, NodeTopology, ReloadResult, RulesError

REPO = Path(__file__).resolve().parents[4]
TWO_CPUS = NodeFacts(topology=NodeTopology(cpus=frozenset({0, 1}), mems=frozenset({0})))
SIXTEEN = NodeFacts(topology=NodeTopology(cpus=frozenset(range(16)), mems=frozenset({0, 1})))
SHARED = "node.koordinator.sh/cpu-shared-pools"
BE = "node.koordinator.sh/be-cpu-shared-pools"
SYSTEM = "node.koordinator.sh/system-qos-resource"
KUBELET = "kubelet.koordinator.sh/cpu-manager-policy"
SIXTEEN_CPU_RULES = {"topology": {
    SHARED: [{"socket": 0, "node": 0, "cpuset": "0-7"}, {"socket": 1, "node": 1,
                                                          "cpuset": "8-15"}],
    BE: [{"socket": 0, "node": 0, "cpuset": "2-7"}, {"socket": 1, "node": 1, "cpuset": "10-15"}],
    SYSTEM: {"cpuset": "0-1"}}}


def rules_file(tmp_path: Path, doc: object) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_a_16_cpu_rules_file_is_refused_on_a_2_cpu_node(tmp_path: Path) -> None:
    koord = KoordinatorQoS(rules_file(tmp_path, SIXTEEN_CPU_RULES), TWO_CPUS)
    with pytest.raises(RulesError) as caught:
        koord.load()
    assert caught.value.key == f"topology.{SHARED}[0].cpuset"
    assert "CPUs 2-7 the node does not have" in str(caught.value)
    KoordinatorQoS(rules_file(tmp_path, SIXTEEN_CPU_RULES), SIXTEEN).load()  # fits 16 CPUs
    KoordinatorQoS(rules_file(tmp_path, SIXTEEN_CPU_RULES), NodeFacts()).load()  # not known


@pytest.mark.parametrize(("topology", "key"), [
    ({SHARED: [{"node": 0, "cpuset": "0-2"}]}, f"{SHARED}[0].cpuset"),
    ({SHARED: [{"node": 1, "cpuset": "0-1"}]}, f"{SHARED}[0].node"),
    ({BE: [{"node": 0, "cpuset": "1"}, {"node": 0, "cpuset": "3"}]}, f"{BE}[1].cpuset"),
    ({SYSTEM: {"cpuset": "2"}}, f"{SYSTEM}.cpuset"),
    ({KUBELET: {"policy": "static", "reservedCPUs": "0,2"}}, f"{KUBELET}.reservedCPUs"),
])
def test_each_cpu_and_node_key_is_checked(tmp_path: Path, topology: dict[str, object],
                                          key: str) -> None:
    koord = KoordinatorQoS(rules_file(tmp_path, {"topology": topology}), TWO_CPUS)
    with pytest.raises(RulesError) as caught:
        koord.load()
    assert caught.value.key == f"topology.{key}"


def test_every_key_in_the_node_loads(tmp_path: Path) -> None:
    fits = {SHARED: [{"node": 0, "cpuset": "0-1"}], BE: [{"node": 0, "cpuset": "1"}],
            SYSTEM: {"cpuset": "0"}, KUBELET: {"policy": "static", "reservedCPUs": "0"}}
    KoordinatorQoS(rules_file(tmp_path, {"topology": fits}), TWO_CPUS).load()


def test_a_reload_that_does_not_fit_is_refused_and_the_previous_rules_stay(
        tmp_path: Path) -> None:
    path = rules_file(tmp_path, {"topology": {SHARED: [{"node": 0, "cpuset": "0-1"}]}})
    koord = KoordinatorQoS(path, TWO_CPUS)
    koord.load()
    before = koord.rules.current
    path.write_text(yaml.safe_dump(SIXTEEN_CPU_RULES) + "\n# changed\n")
    assert koord.rules.poll() is ReloadResult.INVALID
    assert koord.rules.current == before
    assert f"topology.{SHARED}[0].cpuset" in (koord.status().last_error or "")


@pytest.mark.parametrize("name", ["examples/koordinator-rules.yaml",
                                  "deploy/kubernetes/base/rules.yaml",
                                  "deploy/systemd/rules.yaml"])
@pytest.mark.parametrize("cpus", [1, 2, 64])
def test_shipped_rules_load_on_any_node_size(name: str, cpus: int) -> None:
    node = NodeFacts(topology=NodeTopology(cpus=frozenset(range(cpus)), mems=frozenset({0})))
    KoordinatorQoS(REPO / name, node).load()
