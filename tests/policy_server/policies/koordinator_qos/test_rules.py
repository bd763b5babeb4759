"""Rules file parsing: koordlet defaults, NodeSLO merge, errors naming the key."""

from __future__ import annotations

import pytest

from policy_server.exceptions import RulesError
from policy_server.policies.koordinator_qos.rules import (
    CPUQOS,
    Rules,
    rules_from_doc,
    rules_from_yaml,
    rules_summary,
    stabilize,
)
from policy_server.sdk.registry import FailurePolicy


def test_empty_file_gives_koordlet_defaults() -> None:
    rules = rules_from_yaml("")
    assert rules == Rules()
    f = rules.features
    # Feature gates default as koordlet's (docs/koordinator.md#what-runs-where).
    assert (f.BatchResource, f.CPUSetAllocator, f.GroupIdentity) == (True, True, True)
    assert not any([f.CPUNormalization, f.Resctrl, f.GPUEnvInject, f.OOMScoreAdj,
                    f.BECPUManager, f.HamiCoreVGPUMonitor])
    slo = rules.node_slo
    assert slo.cpu_policy == "groupIdentity"
    # Every class is disabled by default and merged to the "none" values (groupIdentity 0).
    assert slo.lsr == slo.ls == slo.be == CPUQOS(False, 0)
    assert not slo.be_threshold_enable and slo.cpu_suppress_policy == "cpuset"
    assert rules.topology is None  # no NodeResourceTopology rule received yet
    assert rules.cpu_normalization_ratio is None
    assert not rules.cfs_quota_disabled
    assert not rules.disable_unset_cpu_quota and not rules.group_identity_kernel_support
    assert rules.hami_core_library_path == "/usr/local/vgpu/libvgpu.so"
    assert rules.failure_policy is FailurePolicy.IGNORE
    # The rest of the NodeSLO defaults are kept in the merged spec.
    spec = slo.spec
    assert spec["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"] == 65
    assert spec["resourceUsedThresholdWithBE"]["memoryEvictThresholdPercent"] == 70
    assert spec["cpuBurstStrategy"]["cfsQuotaBurstPercent"] == 300
    assert spec["resourceQOSStrategy"]["beClass"]["resctrlQOS"]["catRangeEndPercent"] == 100


def test_enabled_classes_take_sloconfig_group_identity() -> None:
    rules = rules_from_yaml(
        """
node_slo:
  resourceQOSStrategy:
    lsrClass: {cpuQOS: {enable: true}}
    lsClass: {cpuQOS: {enable: true}}
    beClass: {cpuQOS: {enable: true}, resctrlQOS: {enable: true}}
"""
    )
    slo = rules.node_slo
    # sloconfig defaults: coreExpeller true for LSR/LS, false for BE.
    assert (slo.lsr, slo.ls, slo.be) == (
        CPUQOS(True, 2, core_expeller=True),
        CPUQOS(True, 2, core_expeller=True),
        CPUQOS(True, -1, core_expeller=False),
    )
    assert rules.group_identity_enabled
    # An enabled resctrlQOS keeps the class default (BE 0-30 %).
    assert slo.spec["resourceQOSStrategy"]["beClass"]["resctrlQOS"]["catRangeEndPercent"] == 30


def test_cfs_quota_suppress_needs_enable_and_policy() -> None:
    on = {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressPolicy": "cfsQuota"}}
    assert rules_from_doc({"node_slo": on}).cfs_quota_disabled
    off = {"resourceUsedThresholdWithBE": {"enable": False, "cpuSuppressPolicy": "cfsQuota"}}
    assert not rules_from_doc({"node_slo": off}).cfs_quota_disabled
    cpuset = {"resourceUsedThresholdWithBE": {"enable": True}}
    assert not rules_from_doc({"node_slo": cpuset}).cfs_quota_disabled


def test_topology_accepts_annotation_json_or_yaml() -> None:
    rules = rules_from_yaml(
        """
topology:
  node.koordinator.sh/cpu-shared-pools: '[{"socket":0,"node":0,"cpuset":"0-7"}]'
  node.koordinator.sh/be-cpu-shared-pools: [{socket: 0, node: 0, cpuset: "2-7"}]
  node.koordinator.sh/system-qos-resource: '{"cpuset":"0-1"}'
  kubelet.koordinator.sh/cpu-manager-policy: {policy: static, reservedCPUs: "0"}
cpu_normalization_ratio: "1.20"
"""
    )
    topo = rules.topology
    assert topo is not None
    assert [p.cpuset for p in topo.cpu_shared_pools] == ["0-7"]
    assert [p.cpuset for p in topo.be_cpu_shared_pools] == ["2-7"]
    assert topo.system_qos_cpuset == "0-1" and topo.system_qos_exclusive is True
    assert topo.kubelet_cpu_manager_policy == "static"
    assert rules.cpu_normalization_ratio == 1.2
    summary = rules_summary(rules)
    assert summary["topology"]["node.koordinator.sh/system-qos-resource"]["cpuset"] == "0-1"


def test_empty_topology_means_rule_received_without_pools() -> None:
    rules = rules_from_yaml("topology: {}")
    assert rules.topology is not None and rules.topology.cpu_shared_pools == ()


def test_real_nodeslo_sections_we_do_not_model_pass_through() -> None:
    rules = rules_from_doc(
        {"node_slo": {"systemStrategy": {"totalNetworkBandwidth": "10G"},
                      "hostApplications": [{"name": "nginx"}],
                      "resourceQOSStrategy": {"lsClass": {"networkQOS": {"enable": True}}}}}
    )
    assert rules.node_slo.spec["hostApplications"] == [{"name": "nginx"}]


@pytest.mark.parametrize(
    ("text", "key", "fragment"),
    [
        ("nodeslo: {}", "nodeslo", "unknown key"),
        ("node_slo: {resourceQOSStrategy: {lsrClass: {cpuQOS: {enable: yes please}}}}",
         "node_slo.resourceQOSStrategy.lsrClass.cpuQOS.enable", "expected a boolean"),
        ("node_slo: {resourceQOSStrategy: {lsClass: {cpuQOS: {groupIdentity: 3}}}}",
         "node_slo.resourceQOSStrategy.lsClass.cpuQOS.groupIdentity", "[-1, 2]"),
        ("node_slo: {resourceQOSStrategy: {lsClass: {cpuQOS: {groupIdentiti: 1}}}}",
         "node_slo.resourceQOSStrategy.lsClass.cpuQOS.groupIdentiti", "unknown key"),
        ("node_slo: {resourceQOSStrategy: {policies: {cpuPolicy: bvt}}}",
         "node_slo.resourceQOSStrategy.policies.cpuPolicy", "groupIdentity, coreSched"),
        ("node_slo: {resourceUsedThresholdWithBE: {cpuSuppressPolicy: quota}}",
         "node_slo.resourceUsedThresholdWithBE.cpuSuppressPolicy", "cpuset, cfsQuota"),
        ("node_slo: {resourceUsedThresholdWithBE: {cpuSuppressThresholdPercent: '65'}}",
         "node_slo.resourceUsedThresholdWithBE.cpuSuppressThresholdPercent", "an integer"),
        ("node_slo: []", "node_slo", "expected a mapping"),
        ("topology: {node.koordinator.sh/cpu-shared-pools: '[{'}",
         "topology.node.koordinator.sh/cpu-shared-pools", "not valid JSON"),
        ("topology: {node.koordinator.sh/cpu-shared-pools: [{node: 0, cpuset: 8-x}]}",
         "topology.node.koordinator.sh/cpu-shared-pools[0].cpuset", "invalid cpu list"),
        ("topology: {node.koordinator.sh/cpu-shared-pools: [{node: one}]}",
         "topology.node.koordinator.sh/cpu-shared-pools[0].node", "an integer"),
        ("topology: {cpu-shared-pools: []}", "topology.cpu-shared-pools", "unknown key"),
        ("features: {GPUEnvInjection: true}", "features.GPUEnvInjection", "unknown feature"),
        ("features: {GPUEnvInject: 1}", "features.GPUEnvInject", "true or false"),
        ("features: {RDMADeviceInject: true}", "features.RDMADeviceInject", "not supported"),
        ("disable_unset_cpu_quota: 'no'", "disable_unset_cpu_quota", "true or false"),
        ("failure_policy: Abort", "failure_policy", "Ignore or Fail"),
        ("hami_core_library_path: lib.so", "hami_core_library_path", "absolute"),
    ],
)
def test_invalid_rules_name_the_key(text: str, key: str, fragment: str) -> None:
    with pytest.raises(RulesError) as info:
        rules_from_yaml(text)
    assert info.value.key == key
    assert fragment in str(info.value)


def test_yaml_syntax_error_names_the_line_and_the_reason() -> None:
    with pytest.raises(RulesError, match="line 3, column 2: this line is indented 1 space, "
                                         "which lines up with no key or item above it"):
        rules_from_yaml("features:\n  x: 1\n y: 2\n")


def test_unsupported_feature_may_be_listed_as_false() -> None:
    assert rules_from_yaml("features: {RDMADeviceInject: false, CoreSched: false}") == Rules()


def test_ratio_changes_below_one_percent_are_ignored() -> None:
    old = rules_from_doc({"cpu_normalization_ratio": 1.2})
    assert stabilize(old, rules_from_doc({"cpu_normalization_ratio": 1.205})) == old
    moved = rules_from_doc({"cpu_normalization_ratio": 1.25})
    assert stabilize(old, moved).cpu_normalization_ratio == 1.25
    removed = rules_from_doc({})
    assert stabilize(old, removed).cpu_normalization_ratio is None
    assert stabilize(None, old) == old


@pytest.mark.parametrize(
    ("value", "fragment"),
    [("0", "> 0"), ("abc", "not a number"), (".nan", "> 0"), ("[1]", "a list")],
)
def test_malformed_ratio_is_ignored_alone(value: str, fragment: str) -> None:
    # koordlet TestPlugin_parseRule "parse ratio failed": the parse errors and the rule keeps
    # its previous ratio; the rest of the node's rules are not affected.
    r = rules_from_yaml(f"cpu_normalization_ratio: {value}\ndisable_unset_cpu_quota: true\n")
    assert r.cpu_normalization_ratio is None and r.disable_unset_cpu_quota is True
    assert r.cpu_normalization_ratio_error is not None
    assert r.cpu_normalization_ratio_error.startswith("cpu_normalization_ratio")
    assert fragment in r.cpu_normalization_ratio_error
    old = rules_from_doc({"cpu_normalization_ratio": 1.2})
    assert stabilize(old, r).cpu_normalization_ratio == 1.2
