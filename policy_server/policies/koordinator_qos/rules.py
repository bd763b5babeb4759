"""The koordinator rules: NodeSLO spec, topology pools, normalization ratio, feature switches.

Owns the typed, immutable ``Rules`` value and its construction from a YAML document, validated
by pydantic models. Missing keys take koordlet's defaults (docs/koordinator.md#rules); every
invalid value raises ``RulesError`` naming the dotted key. Reading the file and reloading it
live in ``rules_watcher``; this module only parses text it is given.

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
    cpu_normalization_via: nri    # or node: cgroups only, beside the runtime (as koordlet)
    features: {CPUNormalization: true, GPUEnvInject: true}
    disable_unset_cpu_quota: false
    group_identity_kernel_support: false
    hami_core_library_path: /usr/local/vgpu/libvgpu.so
    failure_policy: Ignore
    trust:                        # off by default: pod metadata is input, not authority
      annotations: [scheduling.koordinator.sh/resource-status]  # keys trusted everywhere
      namespaces: [koordinator-system]                          # pods trusted for every key
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields, replace
from types import UnionType
from typing import TYPE_CHECKING, Annotated, Any, Union, get_args, get_origin

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
)
from pydantic.fields import FieldInfo

from policy_server.policies.koordinator_qos import keys
from policy_server.policies.koordinator_qos.nodeslo import (
    CPUQOS,
    NodeSLO,
    join_key,
    node_slo_from_doc,
    type_name,
)
from policy_server.sdk import FailurePolicy, RulesError, check_cpu_list, yaml_problem

__all__ = ["CPUQOS", "NodeSLO", "Rules", "Trust", "rules_from_doc", "rules_from_yaml", "stabilize"]

# --- the typed value -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CPUSharedPool:
    """One entry of ``cpu-shared-pools`` / ``be-cpu-shared-pools``."""

    socket: int
    node: int
    cpuset: str


@dataclass(frozen=True, slots=True)
class TopologyRule:
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


@dataclass(frozen=True, slots=True)
class Trust:
    """Who may grant a container more than kubelet gave it (docs/koordinator.md#trust).

    A pod label or annotation named in ``annotations`` is trusted on every pod (the operator's
    admission policy keeps pod authors from setting it); every key of a pod in one of
    ``namespaces`` is trusted. Empty (the default): none is.
    """

    annotations: frozenset[str] = frozenset()
    namespaces: frozenset[str] = frozenset()

    def trusts(self, key: str, namespace: str) -> bool:
        return key in self.annotations or namespace in self.namespaces


def _default_node_slo() -> NodeSLO:
    return node_slo_from_doc({})


@dataclass(frozen=True, slots=True)
class Rules:
    """Everything the koordinator hooks read besides the event itself."""

    node_slo: NodeSLO = field(default_factory=_default_node_slo)
    topology: TopologyRule | None = None
    cpu_normalization_ratio: float | None = None
    cpu_normalization_via: str = keys.NORMALIZE_VIA_NRI
    features: Features = field(default_factory=Features)
    disable_unset_cpu_quota: bool = False
    group_identity_kernel_support: bool = False
    hami_core_library_path: str = keys.DEFAULT_HAMI_CORE_LIBRARY_PATH
    failure_policy: FailurePolicy = FailurePolicy.IGNORE
    # A malformed normalization ratio is ignored on its own (koordlet keeps the previous one)
    # instead of making the whole file invalid; this says why.
    cpu_normalization_ratio_error: str | None = None
    trust: Trust = Trust()

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
# The document is validated by pydantic models (unknown keys refused); the field types carry the
# messages users see, and ``_error`` turns pydantic's first error into a ``RulesError`` naming
# the dotted key.


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected an integer, got {type_name(value)}")
    return value


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {type_name(value)}")
    return value


def _bool(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {type_name(value)}")
    return value


def _cpuset(value: str) -> str:
    return check_cpu_list(value) if value.strip() else ""


def _json_or_yaml(value: object) -> object:
    """Topology values may be the annotation's JSON string or the same structure in YAML."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ValueError(f"not valid JSON: {exc}") from None
    return value


def _json_mapping(value: object) -> object:
    decoded = _json_or_yaml(value)
    if decoded is None and value is not None:  # "null": not the absent section it looks like
        raise ValueError("expected a mapping, got null")
    return decoded


def _pools(value: object) -> object:
    value = _json_or_yaml(value) if value else []
    if not isinstance(value, list):
        raise ValueError(f"expected a list of pools, got {type_name(value)}")
    return value


def _options(value: object) -> object:
    if value is not None and not isinstance(value, dict):
        raise ValueError(f"expected a mapping, got {type_name(value)}")
    return value


def _unsupported(value: object) -> None:
    if value is not False:
        raise ValueError("not supported by this policy server (only false)")


Int = Annotated[int, BeforeValidator(_int)]
Str = Annotated[str, BeforeValidator(_str)]
Bool = Annotated[bool, BeforeValidator(_bool)]
CpuSet = Annotated[str, BeforeValidator(_str), AfterValidator(_cpuset)]


def _key_of(name: str, info: FieldInfo) -> str:
    """A field's key in the file (the annotation name for the topology's fields)."""
    alias = info.validation_alias
    return alias if isinstance(alias, str) else name


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @classmethod
    def unknown(cls) -> str:
        known = ", ".join(_key_of(name, f) for name, f in cls.model_fields.items())
        return f"unknown key (known: {known})"


class _Pool(_Section):
    socket: Int = 0
    node: Int = 0
    cpuset: CpuSet = ""


class _SystemQOS(_Section):
    model_config = ConfigDict(extra="ignore", frozen=True)
    cpuset: CpuSet = ""
    cpusetExclusive: Bool = True


class _Kubelet(_Section):
    model_config = ConfigDict(extra="ignore", frozen=True)
    policy: Str = ""
    reservedCPUs: Str = ""
    options: Annotated[dict[str, Any] | None, BeforeValidator(_options)] = None


_Pools = Annotated[tuple[_Pool, ...], BeforeValidator(_pools)]


class _Topology(_Section):
    cpu_shared_pools: _Pools = Field((), validation_alias=keys.ANNOTATION_CPU_SHARED_POOLS)
    be_cpu_shared_pools: _Pools = Field((), validation_alias=keys.ANNOTATION_BE_CPU_SHARED_POOLS)
    system_qos: Annotated[_SystemQOS | None, BeforeValidator(_json_mapping)] = Field(
        None, validation_alias=keys.ANNOTATION_SYSTEM_QOS_RESOURCE
    )
    kubelet: Annotated[_Kubelet | None, BeforeValidator(_json_mapping)] = Field(
        None, validation_alias=keys.ANNOTATION_KUBELET_CPU_MANAGER_POLICY
    )

    def value(self) -> TopologyRule:
        system, kubelet = self.system_qos or _SystemQOS(), self.kubelet or _Kubelet()
        return TopologyRule(
            cpu_shared_pools=tuple(CPUSharedPool(p.socket, p.node, p.cpuset)
                                   for p in self.cpu_shared_pools),
            be_cpu_shared_pools=tuple(CPUSharedPool(p.socket, p.node, p.cpuset)
                                      for p in self.be_cpu_shared_pools),
            system_qos_cpuset=system.cpuset,
            system_qos_exclusive=system.cpusetExclusive,
            kubelet_cpu_manager_policy=kubelet.policy,
            kubelet_reserved_cpus=kubelet.reservedCPUs,
        )  # fmt: skip


_Unsupported = Annotated[None, BeforeValidator(_unsupported)]
_FEATURES = {f.name: (Bool, f.default) for f in fields(Features)}
_UNSUPPORTED = {name: (_Unsupported, None) for name in keys.UNSUPPORTED_FEATURES}


class _FeatureBase(_Section):
    @classmethod
    def unknown(cls) -> str:
        return f"unknown feature (known: {', '.join(sorted(_FEATURES))})"


# One boolean per feature switch of ``Features``, and the unsupported ones (false only).
if TYPE_CHECKING:
    _Features = _FeatureBase
else:
    _Features = create_model("_Features", __base__=_FeatureBase, **_FEATURES, **_UNSUPPORTED)


def _trusted_key(value: str) -> str:
    if value not in keys.TRUSTED_KEYS:
        raise ValueError(
            f"{value!r} is not a key this policy reads (known: {', '.join(keys.TRUSTED_KEYS)})"
        )
    return value


def _strings(value: object) -> object:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ValueError(f"expected a list of strings, got {type_name(value)}")
    return tuple(value)


class _Trust(_Section):
    annotations: Annotated[
        tuple[Annotated[Str, AfterValidator(_trusted_key)], ...], BeforeValidator(_strings)
    ] = ()
    namespaces: Annotated[
        tuple[Annotated[Str, AfterValidator(_non_empty)], ...], BeforeValidator(_strings)
    ] = ()

    def value(self) -> Trust:
        return Trust(frozenset(self.annotations), frozenset(self.namespaces))


def _non_empty(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


def _failure_policy(value: str) -> str:
    if value not in (FailurePolicy.IGNORE.value, FailurePolicy.FAIL.value):
        raise ValueError(f"must be Ignore or Fail (got {value!r})")
    return value


def _via(value: str) -> str:
    if value not in (keys.NORMALIZE_VIA_NRI, keys.NORMALIZE_VIA_NODE):
        raise ValueError(f"must be {keys.NORMALIZE_VIA_NRI} or {keys.NORMALIZE_VIA_NODE} "
                         f"(got {value!r})")
    return value


def _absolute(value: str) -> str:
    if not value.startswith("/"):
        raise ValueError(f"must be an absolute path (got {value!r})")
    return value


class _Document(_Section):
    """A rules file, top level."""

    node_slo: Any = None  # nodeslo.node_slo_from_doc checks it, naming the key
    topology: _Topology | None = None
    # Checked on its own: a bad ratio is ignored, not an invalid file (``_ratio``).
    cpu_normalization_ratio: Any = None
    cpu_normalization_via: Annotated[Str, AfterValidator(_via)] = keys.NORMALIZE_VIA_NRI
    features: _Features | None = None
    disable_unset_cpu_quota: Bool = False
    group_identity_kernel_support: Bool = False
    hami_core_library_path: Annotated[Str, AfterValidator(_absolute)] = (
        keys.DEFAULT_HAMI_CORE_LIBRARY_PATH
    )
    failure_policy: Annotated[Str, AfterValidator(_failure_policy)] = FailurePolicy.IGNORE.value
    trust: _Trust | None = None


def _section_at(loc: tuple[int | str, ...]) -> Any:
    """The model that holds the key at ``loc`` (for "unknown key (known: ...)")."""
    tp: Any = _Document
    for part in loc:
        tp = _core(tp)
        if isinstance(part, int):
            tp = get_args(tp)[0]
        else:
            by_key = {_key_of(name, f): f for name, f in tp.model_fields.items()}
            tp = by_key[part].annotation
    return _core(tp)


def _core(tp: Any) -> Any:
    while True:
        if get_origin(tp) is Annotated:
            tp = get_args(tp)[0]
        elif get_origin(tp) in (Union, UnionType):
            tp = next(arg for arg in get_args(tp) if arg is not type(None))
        else:
            return tp


def _error(exc: ValidationError) -> RulesError:
    errors = exc.errors(include_url=False)
    # Unknown keys first, as a reader checks a section's keys before their values.
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = tuple(first["loc"])
    key = ""
    for part in loc:
        key += f"[{part}]" if isinstance(part, int) else join_key(key, str(part))[len(key) :]
    if first["type"] == "extra_forbidden":
        return RulesError(key, _section_at(loc[:-1]).unknown())
    if first["type"] in ("model_type", "dict_type", "model_attributes_type"):
        return RulesError(key, f"expected a mapping, got {type_name(first['input'])}")
    return RulesError(key, str(first["msg"]).removeprefix("Value error, "))


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


def rules_from_doc(doc: object) -> Rules:
    """Build ``Rules`` from a parsed YAML document (``None`` = empty file = all defaults)."""
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise RulesError("(top level)", f"expected a mapping, got {type_name(doc)}")
    try:
        d = _Document.model_validate(
            {k: v for k, v in doc.items() if not (k in _NULL_IS_ABSENT and v is None)}
        )
    except ValidationError as exc:
        raise _error(exc) from None
    ratio_error = None
    try:
        ratio = _ratio(d.cpu_normalization_ratio)
    except RulesError as exc:
        ratio, ratio_error = None, str(exc)
    features = d.features.model_dump(include=set(_FEATURES)) if d.features else {}
    return Rules(
        node_slo=node_slo_from_doc({} if d.node_slo is None else d.node_slo),
        topology=d.topology.value() if d.topology is not None else None,
        cpu_normalization_ratio=ratio,
        cpu_normalization_ratio_error=ratio_error,
        cpu_normalization_via=d.cpu_normalization_via,
        features=Features(**features),
        disable_unset_cpu_quota=d.disable_unset_cpu_quota,
        group_identity_kernel_support=d.group_identity_kernel_support,
        hami_core_library_path=d.hami_core_library_path,
        failure_policy=FailurePolicy(d.failure_policy),
        trust=d.trust.value() if d.trust is not None else Trust(),
    )


# A null section is an absent one (the rest are checked: null is not a boolean or a string).
_NULL_IS_ABSENT = frozenset({"topology", "features", "trust"})


def rules_from_yaml(text: str) -> Rules:
    """Parse a rules file's text; YAML syntax errors name the line and the reason."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise RulesError("", f"not valid YAML: {yaml_problem(exc)}") from None
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
        "cpu_normalization_via": rules.cpu_normalization_via,
        "features": {f.name: getattr(rules.features, f.name) for f in fields(Features)},
        "disable_unset_cpu_quota": rules.disable_unset_cpu_quota,
        "group_identity_kernel_support": rules.group_identity_kernel_support,
        "hami_core_library_path": rules.hami_core_library_path,
        "failure_policy": rules.failure_policy.value,
        "trust": {
            "annotations": sorted(rules.trust.annotations),
            "namespaces": sorted(rules.trust.namespaces),
        },
    }
