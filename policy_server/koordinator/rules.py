"""The koordinator rules: NodeSLO spec, topology pools, normalization ratio, feature switches.

Owns the typed, immutable ``Rules`` value and its construction from a YAML document. Missing keys
take koordlet's defaults (spec §5); every invalid value raises ``RulesError`` naming the dotted
key. Reading the file and reloading it live in ``policy_server.koordinator.rules_watcher``;
this module only parses text it is given.

File layout (all keys optional)::

    node_slo:                     # NodeSLO spec, camelCase as in the CRD
      resourceQOSStrategy: {...}
      resourceUsedThresholdWithBE: {...}
    topology:                     # NodeResourceTopology annotations; absent = none received yet
      node.koordinator.sh/cpu-shared-pools: [{socket: 0, node: 0, cpuset: "0-7"}]
      node.koordinator.sh/be-cpu-shared-pools: '[{"socket":0,"node":0,"cpuset":"0-7"}]'
      node.koordinator.sh/system-qos-resource: {cpuset: "0-1", cpusetExclusive: true}
      kubelet.koordinator.sh/cpu-manager-policy: {policy: static, reservedCPUs: "0"}
    cpu_normalization_ratio: 1.2  # node.koordinator.sh/cpu-normalization-ratio
    features: {CPUNormalization: true, GPUEnvInject: true}
    disable_unset_cpu_quota: false
    group_identity_kernel_support: false
    hami_core_library_path: /usr/local/vgpu/libvgpu.so
    failure_policy: Ignore
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

import yaml

from policy_server.koordinator import keys
from policy_server.koordinator.nodeslo import (
    CPUQOS,
    NodeSLO,
    join_key,
    node_slo_from_doc,
    type_name,
)
from policy_server.sdk import FailurePolicy, RulesError, check_cpu_list

__all__ = ["CPUQOS", "NodeSLO", "Rules", "rules_from_doc", "rules_from_yaml", "stabilize"]

# --- the typed value -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CPUSharedPool:
    """One entry of ``cpu-shared-pools`` / ``be-cpu-shared-pools``."""

    socket: int
    node: int
    cpuset: str


@dataclass(frozen=True, slots=True)
class Topology:
    """NodeResourceTopology-derived rule; its presence means "a rule has been received"."""

    cpu_shared_pools: tuple[CPUSharedPool, ...] = ()
    be_cpu_shared_pools: tuple[CPUSharedPool, ...] = ()
    system_qos_cpuset: str = ""
    system_qos_exclusive: bool = True
    kubelet_cpu_manager_policy: str = ""
    kubelet_reserved_cpus: str = ""


@dataclass(frozen=True, slots=True)
class Features:
    """Feature switches, defaulting as koordlet's feature gates do."""

    BatchResource: bool = keys.FEATURE_DEFAULTS["BatchResource"]
    CPUNormalization: bool = keys.FEATURE_DEFAULTS["CPUNormalization"]
    CPUSetAllocator: bool = keys.FEATURE_DEFAULTS["CPUSetAllocator"]
    GroupIdentity: bool = keys.FEATURE_DEFAULTS["GroupIdentity"]
    Resctrl: bool = keys.FEATURE_DEFAULTS["Resctrl"]
    GPUEnvInject: bool = keys.FEATURE_DEFAULTS["GPUEnvInject"]
    OOMScoreAdj: bool = keys.FEATURE_DEFAULTS["OOMScoreAdj"]
    BECPUManager: bool = keys.FEATURE_DEFAULTS["BECPUManager"]
    HamiCoreVGPUMonitor: bool = keys.FEATURE_DEFAULTS["HamiCoreVGPUMonitor"]
    CoreSched: bool = keys.FEATURE_DEFAULTS["CoreSched"]


def _default_node_slo() -> NodeSLO:
    return node_slo_from_doc({})


@dataclass(frozen=True, slots=True)
class Rules:
    """Everything the koordinator hooks read besides the event itself."""

    node_slo: NodeSLO = field(default_factory=_default_node_slo)
    topology: Topology | None = None
    cpu_normalization_ratio: float | None = None
    features: Features = field(default_factory=Features)
    disable_unset_cpu_quota: bool = False
    group_identity_kernel_support: bool = False
    hami_core_library_path: str = keys.DEFAULT_HAMI_CORE_LIBRARY_PATH
    failure_policy: FailurePolicy = FailurePolicy.IGNORE
    # A malformed normalization ratio is ignored on its own (koordlet keeps the previous one)
    # instead of making the whole file invalid; this says why.
    cpu_normalization_ratio_error: str | None = None

    @property
    def cfs_quota_disabled(self) -> bool:
        """BE CFS quota is disabled when BE CPU is suppressed by ``cfsQuota`` instead."""
        slo = self.node_slo
        return slo.be_threshold_enable and slo.cpu_suppress_policy == "cfsQuota"

    @property
    def group_identity_enabled(self) -> bool:
        """koordlet's "rule enabled": any of LSR/LS/BE has ``cpuQOS.enable``."""
        slo = self.node_slo
        return slo.lsr.enable or slo.ls.enable or slo.be.enable


# --- parsing ---------------------------------------------------------------------------------


def _json_or_yaml(value: object, where: str) -> object:
    """Topology values may be the annotation's JSON string or the same structure in YAML."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError as exc:
            raise RulesError(where, f"not valid JSON: {exc}") from None
    return value


def _int(d: Mapping[str, Any], key: str, where: str, default: int | None = None) -> int:
    value = d.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise RulesError(join_key(where, key), f"expected an integer, got {type_name(value)}")
    return value


def _string(d: Mapping[str, Any], key: str, where: str, default: str | None = None) -> str:
    value = d.get(key, default)
    if not isinstance(value, str):
        raise RulesError(join_key(where, key), f"expected a string, got {type_name(value)}")
    return value


def _bool(d: Mapping[str, Any], key: str, where: str, default: bool) -> bool:
    value = d.get(key, default)
    if not isinstance(value, bool):
        raise RulesError(join_key(where, key), f"expected true or false, got {type_name(value)}")
    return value


def _cpuset(value: str, where: str, *, allow_empty: bool) -> str:
    if allow_empty and not value.strip():
        return ""
    try:
        return check_cpu_list(value)
    except ValueError as exc:
        raise RulesError(where, str(exc)) from None


def _pools(value: object, where: str) -> tuple[CPUSharedPool, ...]:
    value = _json_or_yaml(value, where)
    if not isinstance(value, list):
        raise RulesError(where, f"expected a list of pools, got {type_name(value)}")
    pools = []
    for i, item in enumerate(value):
        w = f"{where}[{i}]"
        if not isinstance(item, dict):
            raise RulesError(w, f"expected a mapping, got {type_name(item)}")
        for key in item:
            if key not in ("socket", "node", "cpuset"):
                raise RulesError(join_key(w, str(key)), "unknown key (known: socket, node, cpuset)")
        pools.append(
            CPUSharedPool(
                socket=_int(item, "socket", w, 0),
                node=_int(item, "node", w, 0),
                cpuset=_cpuset(_string(item, "cpuset", w, ""), f"{w}.cpuset", allow_empty=True),
            )
        )
    return tuple(pools)


def _mapping(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise RulesError(where, f"expected a mapping, got {type_name(value)}")
    return value


def _topology(doc: object) -> Topology | None:
    if doc is None:
        return None
    d = _mapping(doc, "topology")
    known = (
        keys.ANNOTATION_CPU_SHARED_POOLS,
        keys.ANNOTATION_BE_CPU_SHARED_POOLS,
        keys.ANNOTATION_SYSTEM_QOS_RESOURCE,
        keys.ANNOTATION_KUBELET_CPU_MANAGER_POLICY,
    )
    for key in d:
        if key not in known:
            raise RulesError(f"topology.{key}", f"unknown key (known: {', '.join(known)})")
    system: Mapping[str, Any] = {}
    kubelet: Mapping[str, Any] = {}
    if d.get(keys.ANNOTATION_SYSTEM_QOS_RESOURCE) is not None:
        where = f"topology.{keys.ANNOTATION_SYSTEM_QOS_RESOURCE}"
        system = _mapping(_json_or_yaml(d[keys.ANNOTATION_SYSTEM_QOS_RESOURCE], where), where)
    if d.get(keys.ANNOTATION_KUBELET_CPU_MANAGER_POLICY) is not None:
        where = f"topology.{keys.ANNOTATION_KUBELET_CPU_MANAGER_POLICY}"
        kubelet = _mapping(
            _json_or_yaml(d[keys.ANNOTATION_KUBELET_CPU_MANAGER_POLICY], where), where
        )
        if kubelet.get("options") is not None:
            _mapping(kubelet["options"], f"{where}.options")
    sys_where = f"topology.{keys.ANNOTATION_SYSTEM_QOS_RESOURCE}"
    kube_where = f"topology.{keys.ANNOTATION_KUBELET_CPU_MANAGER_POLICY}"
    return Topology(
        cpu_shared_pools=_pools(
            d.get(keys.ANNOTATION_CPU_SHARED_POOLS) or [],
            f"topology.{keys.ANNOTATION_CPU_SHARED_POOLS}",
        ),
        be_cpu_shared_pools=_pools(
            d.get(keys.ANNOTATION_BE_CPU_SHARED_POOLS) or [],
            f"topology.{keys.ANNOTATION_BE_CPU_SHARED_POOLS}",
        ),
        system_qos_cpuset=_cpuset(
            _string(system, "cpuset", sys_where, ""), f"{sys_where}.cpuset", allow_empty=True
        ),
        system_qos_exclusive=_bool(system, "cpusetExclusive", sys_where, True),
        kubelet_cpu_manager_policy=_string(kubelet, "policy", kube_where, ""),
        kubelet_reserved_cpus=_string(kubelet, "reservedCPUs", kube_where, ""),
    )


def _ratio(value: object) -> float | None:
    if value is None:
        return None
    where = "cpu_normalization_ratio"
    if isinstance(value, bool):
        raise RulesError(where, 'expected a number such as 1.2 or "1.20", got a boolean')
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise RulesError(where, f"not a number: {value!r}") from None
    if not isinstance(value, int | float):
        raise RulesError(where, f"expected a number, got {type_name(value)}")
    ratio = float(value)
    if not 0 < ratio < float("inf"):
        raise RulesError(where, f"must be a finite number > 0 (got {value})")
    return ratio


def _features(doc: object) -> Features:
    if doc is None:
        return Features()
    d = _mapping(doc, "features")
    values: dict[str, bool] = {}
    names = {f.name for f in fields(Features)}
    for key, value in d.items():
        where = f"features.{key}"
        if key in keys.UNSUPPORTED_FEATURES:
            if value is not False:
                raise RulesError(where, "not supported by this policy server (only false)")
            continue
        if key not in names:
            raise RulesError(where, f"unknown feature (known: {', '.join(sorted(names))})")
        if not isinstance(value, bool):
            raise RulesError(where, f"expected true or false, got {type_name(value)}")
        values[key] = value
    return Features(**values)


_TOP_KEYS = (
    "node_slo",
    "topology",
    "cpu_normalization_ratio",
    "features",
    "disable_unset_cpu_quota",
    "group_identity_kernel_support",
    "hami_core_library_path",
    "failure_policy",
)


def rules_from_doc(doc: object) -> Rules:
    """Build ``Rules`` from a parsed YAML document (``None`` = empty file = all defaults)."""
    if doc is None:
        doc = {}
    d = _mapping(doc, "(top level)")
    for key in d:
        if key not in _TOP_KEYS:
            raise RulesError(str(key), f"unknown key (known: {', '.join(_TOP_KEYS)})")
    failure = _string(d, "failure_policy", "", FailurePolicy.IGNORE.value)
    if failure not in (FailurePolicy.IGNORE.value, FailurePolicy.FAIL.value):
        raise RulesError("failure_policy", f"must be Ignore or Fail (got {failure!r})")
    library = _string(d, "hami_core_library_path", "", keys.DEFAULT_HAMI_CORE_LIBRARY_PATH)
    if not library.startswith("/"):
        raise RulesError("hami_core_library_path", f"must be an absolute path (got {library!r})")
    ratio_error = None
    try:
        ratio = _ratio(d.get("cpu_normalization_ratio"))
    except RulesError as exc:
        ratio, ratio_error = None, str(exc)
    return Rules(
        node_slo=node_slo_from_doc({} if d.get("node_slo") is None else d["node_slo"]),
        topology=_topology(d.get("topology")),
        cpu_normalization_ratio=ratio,
        cpu_normalization_ratio_error=ratio_error,
        features=_features(d.get("features")),
        disable_unset_cpu_quota=_bool(d, "disable_unset_cpu_quota", "", False),
        group_identity_kernel_support=_bool(d, "group_identity_kernel_support", "", False),
        hami_core_library_path=library,
        failure_policy=FailurePolicy(failure),
    )


def rules_from_yaml(text: str) -> Rules:
    """Parse a rules file's text; YAML syntax errors name the line."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise RulesError("", f"not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    return rules_from_doc(doc)


# Ratio changes smaller than this are ignored (koordlet keeps the previous ratio).
RATIO_CHANGE_EPSILON = 0.01


def stabilize(previous: Rules | None, new: Rules) -> Rules:
    """Apply koordlet's hysteresis when replacing ``previous`` by ``new``.

    An unparsable ratio leaves the previous one in force (koordlet's rule parse fails and the
    rule stays unchanged); small changes (< 0.01) are ignored.
    """
    if previous is not None and new.cpu_normalization_ratio_error is not None:
        return replace(new, cpu_normalization_ratio=previous.cpu_normalization_ratio)
    if previous is None or previous.cpu_normalization_ratio is None:
        return new
    old, cur = previous.cpu_normalization_ratio, new.cpu_normalization_ratio
    if cur is not None and abs(cur - old) < RATIO_CHANGE_EPSILON and cur != old:
        return replace(new, cpu_normalization_ratio=old)
    return new


def rules_summary(rules: Rules) -> dict[str, Any]:
    """A JSON-able view of the effective rules (for ``GET /v1/policies/koordinator-qos/rules``)."""
    topo = rules.topology
    return {
        "node_slo": rules.node_slo.spec,
        "topology": None
        if topo is None
        else {
            keys.ANNOTATION_CPU_SHARED_POOLS: [
                {"socket": p.socket, "node": p.node, "cpuset": p.cpuset}
                for p in topo.cpu_shared_pools
            ],
            keys.ANNOTATION_BE_CPU_SHARED_POOLS: [
                {"socket": p.socket, "node": p.node, "cpuset": p.cpuset}
                for p in topo.be_cpu_shared_pools
            ],
            keys.ANNOTATION_SYSTEM_QOS_RESOURCE: {
                "cpuset": topo.system_qos_cpuset,
                "cpusetExclusive": topo.system_qos_exclusive,
            },
            keys.ANNOTATION_KUBELET_CPU_MANAGER_POLICY: {
                "policy": topo.kubelet_cpu_manager_policy,
                "reservedCPUs": topo.kubelet_reserved_cpus,
            },
        },
        "cpu_normalization_ratio": rules.cpu_normalization_ratio,
        "cpu_normalization_ratio_error": rules.cpu_normalization_ratio_error,
        "features": {f.name: getattr(rules.features, f.name) for f in fields(Features)},
        "disable_unset_cpu_quota": rules.disable_unset_cpu_quota,
        "group_identity_kernel_support": rules.group_identity_kernel_support,
        "hami_core_library_path": rules.hami_core_library_path,
        "failure_policy": rules.failure_policy.value,
    }
