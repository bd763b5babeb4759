"""The NodeSLO spec as the koordinator hooks read it: koordlet's defaults and merge
(docs/koordinator.md#rules).

Owns ``NODE_SLO_DEFAULTS`` (sloconfig), the JSON overlay of a user's spec onto them with type
checks naming the key, and koordlet's replacement of a disabled class's payload by the "none"
values. Pure: parses a document it is given.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from policy_server.policies.koordinator_qos import keys
from policy_server.sdk import RulesError

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
    core_expeller: bool = False
    sched_idle: int = 0


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


# --- parsing ---------------------------------------------------------------------------------


def join_key(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def type_name(value: object) -> str:
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
        raise RulesError(path or "node_slo", f"expected a mapping, got {type_name(user)}")
    out = copy.deepcopy(base)
    closed = path.removeprefix("node_slo.").removeprefix("node_slo") in _CLOSED_SECTIONS
    for key, value in user.items():
        where = join_key(path, str(key))
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
            raise RulesError(where, f"expected {type_name(base[key])}, got {type_name(value)}")
        else:
            out[key] = value
    return out


def node_slo_from_doc(doc: object) -> NodeSLO:
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
        return CPUQOS(
            enable=section["enable"],
            group_identity=section["groupIdentity"],
            core_expeller=section["coreExpeller"],
            sched_idle=section["schedIdle"],
        )

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
