"""The koordinator rules: NodeSLO spec, topology pools, normalization ratio, feature switches.

Owns the typed, immutable ``Rules`` value and its construction from a YAML document. Missing keys
take koordlet's defaults (spec §5); every invalid value raises ``RulesError`` naming the dotted
key. Reading the file and reloading it live in ``policy_server.rules_watcher``; this module only
parses text it is given.

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

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

import yaml

from policy_server.errors import RulesError
from policy_server.koordinator import keys
from policy_server.koordinator.cpulist import check_cpu_list
from policy_server.registry import FailurePolicy

# --- NodeSLO defaults (sloconfig) ------------------------------------------------------------


def _class_defaults(
    group_identity: int, core_expeller: bool, cat_end: int, wmark_min_adj: int
) -> dict[str, Any]:
    return {
        "cpuQOS": {
            "enable": False,
            "groupIdentity": group_identity,
            "schedIdle": 0,
            "coreExpeller": core_expeller,
        },
        "resctrlQOS": {
            "enable": False,
            "catRangeStartPercent": 0,
            "catRangeEndPercent": cat_end,
            "mbaPercent": 100,
        },
        "memoryQOS": {
            "enable": False,
            "minLimitPercent": 0,
            "lowLimitPercent": 0,
            "throttlingPercent": 0,
            "wmarkRatio": 95,
            "wmarkScalePermill": 20,
            "wmarkMinAdj": wmark_min_adj,
        },
    }


NODE_SLO_DEFAULTS: dict[str, Any] = {
    "resourceQOSStrategy": {
        "policies": {"cpuPolicy": "groupIdentity", "netQOSPolicy": "tc"},
        "lsrClass": _class_defaults(2, True, 100, -25),
        "lsClass": _class_defaults(2, True, 100, -25),
        "beClass": _class_defaults(-1, False, 30, 50),
        "systemClass": _class_defaults(0, False, 100, -25),
    },
    "resourceUsedThresholdWithBE": {
        "enable": False,
        "cpuSuppressThresholdPercent": 65,
        "cpuSuppressPolicy": "cpuset",
        "memoryEvictThresholdPercent": 70,
        "cpuEvictPolicy": "evictByRealLimit",
    },
    "cpuBurstStrategy": {
        "policy": "none",
        "cpuBurstPercent": 1000,
        "cfsQuotaBurstPercent": 300,
        "cfsQuotaBurstPeriodSeconds": -1,
        "sharePoolThresholdPercent": 50,
    },
}

# A disabled class's payload is replaced by these "none" values (koordlet's merge step).
_NONE_QOS: dict[str, dict[str, Any]] = {
    "cpuQOS": {"enable": False, "groupIdentity": 0, "schedIdle": 0, "coreExpeller": False},
    "resctrlQOS": {
        "enable": False,
        "catRangeStartPercent": 0,
        "catRangeEndPercent": 100,
        "mbaPercent": 100,
    },
    "memoryQOS": {
        "enable": False,
        "minLimitPercent": 0,
        "lowLimitPercent": 0,
        "throttlingPercent": 0,
        "wmarkRatio": 0,
        "wmarkScalePermill": 50,
        "wmarkMinAdj": 0,
    },
}

# Where unknown keys are an error (we read these sections); elsewhere NodeSLO keys we do not
# model pass through untouched so a real NodeSLO spec can be pasted in.
_CLOSED_SECTIONS = {
    "",
    "resourceQOSStrategy",
    "resourceQOSStrategy.policies",
    "resourceQOSStrategy.lsrClass.cpuQOS",
    "resourceQOSStrategy.lsClass.cpuQOS",
    "resourceQOSStrategy.beClass.cpuQOS",
    "resourceQOSStrategy.systemClass.cpuQOS",
    "resourceUsedThresholdWithBE",
}
_NODE_SLO_TOP_KEYS = {
    "resourceQOSStrategy",
    "resourceUsedThresholdWithBE",
    "cpuBurstStrategy",
    "systemStrategy",
    "extensions",
    "hostApplications",
}
_QOS_CLASS_KEYS = ("lsrClass", "lsClass", "beClass", "systemClass")
_CPU_POLICIES = ("", "groupIdentity", "coreSched")
_SUPPRESS_POLICIES = ("cpuset", "cfsQuota")


# --- the typed value -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CPUQOS:
    """One class's effective ``cpuQOS`` after the merge."""

    enable: bool
    group_identity: int


@dataclass(frozen=True, slots=True)
class NodeSLO:
    """The parts of the merged NodeSLO spec the hooks read, plus the whole merged spec."""

    cpu_policy: str = "groupIdentity"
    lsr: CPUQOS = CPUQOS(False, 0)
    ls: CPUQOS = CPUQOS(False, 0)
    be: CPUQOS = CPUQOS(False, 0)
    system: CPUQOS = CPUQOS(False, 0)
    be_threshold_enable: bool = False
    cpu_suppress_policy: str = "cpuset"
    spec: Mapping[str, Any] = field(default_factory=dict)


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


def _default_node_slo() -> NodeSLO:
    return _node_slo_from_doc({})


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


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _type_name(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return "null" if value is None else type(value).__name__


def _same_type(default: object, value: object) -> bool:
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(default, str):
        return isinstance(value, str)
    return True


def _overlay(base: dict[str, Any], user: object, path: str) -> dict[str, Any]:
    """JSON-overlay ``user`` onto a deep copy of ``base``, type-checking known leaves."""
    if not isinstance(user, dict):
        raise RulesError(path or "node_slo", f"expected a mapping, got {_type_name(user)}")
    out = copy.deepcopy(base)
    closed = path.removeprefix("node_slo.").removeprefix("node_slo") in _CLOSED_SECTIONS
    for key, value in user.items():
        where = _join(path, str(key))
        if not isinstance(key, str):
            raise RulesError(where, "keys must be strings")
        if key not in base:
            allowed = path == "node_slo" and key in _NODE_SLO_TOP_KEYS
            if closed and not allowed:
                known = set(base) | (_NODE_SLO_TOP_KEYS if path == "node_slo" else set())
                raise RulesError(where, f"unknown key (known: {', '.join(sorted(known))})")
            out[key] = copy.deepcopy(value)
        elif isinstance(base[key], dict):
            out[key] = _overlay(base[key], value, where)
        elif not _same_type(base[key], value):
            raise RulesError(where, f"expected {_type_name(base[key])}, got {_type_name(value)}")
        else:
            out[key] = value
    return out


def _node_slo_from_doc(doc: object) -> NodeSLO:
    spec = _overlay(NODE_SLO_DEFAULTS, doc, "node_slo")
    strategy = spec["resourceQOSStrategy"]
    for class_key in _QOS_CLASS_KEYS:
        payload = strategy[class_key]
        value = payload["cpuQOS"]["groupIdentity"]
        if not keys.BVT_MIN <= value <= keys.BVT_MAX:
            raise RulesError(
                f"node_slo.resourceQOSStrategy.{class_key}.cpuQOS.groupIdentity",
                f"must be in [{keys.BVT_MIN}, {keys.BVT_MAX}] (got {value})",
            )
        for qos_key, none_values in _NONE_QOS.items():
            section = payload.get(qos_key)
            # koordlet merges a disabled LSR/LS/BE payload to the "none" values.
            disabled = isinstance(section, dict) and section.get("enable") is False
            if disabled and class_key != "systemClass":
                payload[qos_key] = copy.deepcopy(none_values)
    policy = strategy["policies"]["cpuPolicy"]
    if policy not in _CPU_POLICIES:
        raise RulesError(
            "node_slo.resourceQOSStrategy.policies.cpuPolicy",
            f"must be one of groupIdentity, coreSched (got {policy!r})",
        )
    threshold = spec["resourceUsedThresholdWithBE"]
    if threshold["cpuSuppressPolicy"] not in _SUPPRESS_POLICIES:
        raise RulesError(
            "node_slo.resourceUsedThresholdWithBE.cpuSuppressPolicy",
            f"must be one of cpuset, cfsQuota (got {threshold['cpuSuppressPolicy']!r})",
        )

    def cpu_qos(class_key: str) -> CPUQOS:
        section = strategy[class_key]["cpuQOS"]
        return CPUQOS(enable=section["enable"], group_identity=section["groupIdentity"])

    return NodeSLO(
        cpu_policy=policy,
        lsr=cpu_qos("lsrClass"),
        ls=cpu_qos("lsClass"),
        be=cpu_qos("beClass"),
        system=cpu_qos("systemClass"),
        be_threshold_enable=threshold["enable"],
        cpu_suppress_policy=threshold["cpuSuppressPolicy"],
        spec=spec,
    )


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
        raise RulesError(_join(where, key), f"expected an integer, got {_type_name(value)}")
    return value


def _string(d: Mapping[str, Any], key: str, where: str, default: str | None = None) -> str:
    value = d.get(key, default)
    if not isinstance(value, str):
        raise RulesError(_join(where, key), f"expected a string, got {_type_name(value)}")
    return value


def _bool(d: Mapping[str, Any], key: str, where: str, default: bool) -> bool:
    value = d.get(key, default)
    if not isinstance(value, bool):
        raise RulesError(_join(where, key), f"expected true or false, got {_type_name(value)}")
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
        raise RulesError(where, f"expected a list of pools, got {_type_name(value)}")
    pools = []
    for i, item in enumerate(value):
        w = f"{where}[{i}]"
        if not isinstance(item, dict):
            raise RulesError(w, f"expected a mapping, got {_type_name(item)}")
        for key in item:
            if key not in ("socket", "node", "cpuset"):
                raise RulesError(_join(w, str(key)), "unknown key (known: socket, node, cpuset)")
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
        raise RulesError(where, f"expected a mapping, got {_type_name(value)}")
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
        raise RulesError(where, f"expected a number, got {_type_name(value)}")
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
            raise RulesError(where, f"expected true or false, got {_type_name(value)}")
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
    return Rules(
        node_slo=_node_slo_from_doc({} if d.get("node_slo") is None else d["node_slo"]),
        topology=_topology(d.get("topology")),
        cpu_normalization_ratio=_ratio(d.get("cpu_normalization_ratio")),
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
    """Apply koordlet's hysteresis when replacing ``previous`` by ``new``."""
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
        "features": {f.name: getattr(rules.features, f.name) for f in fields(Features)},
        "disable_unset_cpu_quota": rules.disable_unset_cpu_quota,
        "group_identity_kernel_support": rules.group_identity_kernel_support,
        "hami_core_library_path": rules.hami_core_library_path,
        "failure_policy": rules.failure_policy.value,
    }
