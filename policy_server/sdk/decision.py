"""What a policy handler returns.

Owns the decision value types (frozen dataclasses): the adjustment, updates, evictions, the
reject, warnings and pushes, and the ``Decision`` that holds them with the node effects
(``policy_server.sdk.effects``). An ``Adjustment`` types the fields policies commonly
set; the rest of NRI's ``ContainerAdjustment`` (namespaces, net devices, I/O priority, seccomp
policy, scheduler, RDT, memory policy, cgroups path, ...) goes in its ``extra``: the reply's
``adjust`` JSON, checked against the webhook contract when the ``Adjustment`` is built, as the
bridge checks an HTTP reply's shape. Every value is built with the reply contract's JSON types
and inside its limits (``policy_server.sdk.limit_checks``: strings, integers (no bool),
booleans, lists and maps of them where the schema has them; a non-empty container id, a reject
reason of 1-4096 characters, at most 100 warnings of at most 1024 characters, the
ranges and grammars of bridge.contract.value_rules) or raises
``ValueError`` naming the field, so the reply encoded from a decision needs no check.
``assembled`` / ``amended`` build these values from parts already built (and checked) without
checking them again: the framework's merge and its amendments of the merged decision, whose
warnings may then outnumber the contract's limit and whose joined reason may outgrow it (the
encoder fits both, once). ``policy_server.sdk.decision_merge`` merges several handlers'
decisions; ``policy_server.engine.reply`` turns the merged one into the reply body. Must not do
I/O or import web frameworks; policies may import it (it sits below the engine).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from types import MappingProxyType
from typing import Any, TypeVar

import orjson
from pydantic import ValidationError

from bridge.contract import WebhookReply
from bridge.contract.value_rules import REMOVAL_KEYS
from policy_server.sdk.effects import Effect
from policy_server.sdk.limit_checks import Pairs, checks
from policy_server.sdk.oci import Device, Mount, Rlimit, StagedHook, check_mount, no_strings
from policy_server.sdk.resource_patch import NO_RESOURCES, ResourcePatch

_NO_EXTRA: Mapping[str, Any] = MappingProxyType({})
_T = TypeVar("_T")
# ``adjust.remove`` keys -> the ``Adjustment`` field holding that list (the reply JSON, its
# check and its reading all go by it).
REMOVAL_FIELDS: Mapping[str, str] = MappingProxyType({
    key: f"remove_{key}" for key in REMOVAL_KEYS  # the contract's, in its order
})


@dataclass(frozen=True, slots=True)
class Adjustment:
    """A ``ContainerAdjustment`` (CreateContainer only), removals explicit."""

    env: Mapping[str, str] = field(default_factory=no_strings)
    annotations: Mapping[str, str] = field(default_factory=no_strings)
    mounts: tuple[Mount, ...] = ()
    resources: ResourcePatch = NO_RESOURCES
    oom_score_adj: int | None = None
    remove_env: tuple[str, ...] = ()
    remove_annotations: tuple[str, ...] = ()
    remove_mounts: tuple[str, ...] = ()
    # The privileged kinds (see policy_server.sdk.oci): the webhook must allow them.
    devices: tuple[Device, ...] = ()
    cdi_devices: tuple[str, ...] = ()
    hooks: tuple[StagedHook, ...] = ()
    rlimits: tuple[Rlimit, ...] = ()
    # The command line, replaced whole (NRI v0.10+); None leaves it alone.
    args: tuple[str, ...] | None = None
    sysctl: Mapping[str, str] = field(default_factory=no_strings)
    remove_sysctl: tuple[str, ...] = ()
    remove_devices: tuple[str, ...] = ()  # device paths
    remove_namespaces: tuple[str, ...] = ()  # namespace types
    remove_net_devices: tuple[str, ...] = ()  # host interface names
    # Any other part of the reply's ``adjust`` JSON (``{"linux": {"namespaces": [...]}}``),
    # laid over the typed fields' JSON (objects key by key); checked against the contract here.
    extra: Mapping[str, Any] = field(default_factory=lambda: _NO_EXTRA)

    def __post_init__(self) -> None:
        _check_adjustment(self)
        for mount in self.mounts:  # a named tuple, built per request: checked where it is sent
            check_mount(mount)
        if self.extra:
            # As the reply is checked (policy_server.engine.reply.reply_body): its JSON.
            try:
                try:
                    body = orjson.dumps({"adjust": self.extra})
                except TypeError:
                    # Not JSON (an integer past 64 bits): the Python check names the field.
                    WebhookReply.model_validate({"adjust": self.extra}, strict=True)
                    raise
                WebhookReply.model_validate_json(body)
            except (TypeError, ValidationError) as exc:
                raise ValueError(f"Adjustment.extra is outside the contract: {exc}") from None

    def removals(self) -> Mapping[str, tuple[str, ...]]:
        """The reply's ``adjust.remove`` lists, by key (only the non-empty ones)."""
        lists = ((key, getattr(self, name)) for key, name in REMOVAL_FIELDS.items())
        return {key: values for key, values in lists if values}

    def is_empty(self) -> bool:
        return (
            not (self.env or self.annotations or self.mounts or self.sysctl or self.extra)
            and self.resources.is_empty()
            and self.oom_score_adj is None
            and self.args is None
            and not self.removals()
            and not (self.devices or self.cdi_devices or self.hooks or self.rlimits)
        )


@dataclass(frozen=True, slots=True)
class ContainerUpdate:
    """A ``ContainerUpdate``: new resources for one existing container."""

    container_id: str
    resources: ResourcePatch
    ignore_failure: bool = False

    def __post_init__(self) -> None:
        _check_update(self)


@dataclass(frozen=True, slots=True)
class Eviction:
    """A ``ContainerEviction``."""

    container_id: str
    reason: str = ""

    def __post_init__(self) -> None:
        _check_eviction(self)


@dataclass(frozen=True, slots=True)
class Decision:
    """One handler's (or the merged) answer to an event.

    ``errors`` are failures after which the handler still returns partial output (koordlet
    keeps what a failing hook already set); the engine applies the policy's failure policy to
    them. ``effects`` never reach the reply: they go to the side-effect executor. ``push`` never
    reaches the reply either: the server sends those updates through the bridge's
    ``POST /v1/updates`` after replying (for events whose reply cannot carry ``update``, such
    as RemoveContainer, the NRI way to change other containers then is UpdateContainers).
    """

    adjust: Adjustment | None = None
    update: tuple[ContainerUpdate, ...] = ()
    evict: tuple[Eviction, ...] = ()
    reject: str | None = None
    warnings: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    effects: tuple[Effect, ...] = ()
    push: tuple[ContainerUpdate, ...] = ()

    def __post_init__(self) -> None:
        _check_decision(self)


# The reply paths each type's fields go to (their JSON types and limits are the contract's);
# a field holding SDK values (a ResourcePatch, Mounts) needs none: its class is checked.
_check_adjustment = checks(Adjustment, {
    "env": Pairs("adjust/env", "key", "value"),
    "annotations": "adjust/annotations",
    "oom_score_adj": "adjust/linux/oom_score_adj",
    **{name: f"adjust/remove/{key}" for key, name in REMOVAL_FIELDS.items()},
    "cdi_devices": "adjust/CDI_devices/[]/name",
    "args": "adjust/args",
    "sysctl": "adjust/linux/sysctl",
}, elsewhere=("extra",))  # checked against the contract model as a whole
_check_update = checks(ContainerUpdate, {"container_id": "update/[]/container_id",
                                         "ignore_failure": "update/[]/ignore_failure"})
_check_eviction = checks(Eviction, {"container_id": "evict/[]/container_id",
                                    "reason": "evict/[]/reason"})
# ``errors`` end as warnings or a reject's reason: strings, as warnings are.
_check_decision = checks(Decision, {"reject": "reject/reason", "warnings": "warnings",
                                    "errors": "warnings/[]"})


def assembled(cls: type[_T], **parts: Any) -> _T:
    """A ``cls`` (one of this SDK's frozen value types) of ``parts``, its other fields at their
    defaults, not checked: for the framework joining values that were checked when built (the
    merge of handlers' decisions). A policy builds its values with their constructors."""
    value = object.__new__(cls)
    for f in fields(cls):  # type: ignore[arg-type]
        if f.name in parts:
            item = parts[f.name]
        elif f.default is not MISSING:
            item = f.default
        else:
            item = f.default_factory()  # type: ignore[operator]
        object.__setattr__(value, f.name, item)
    return value


def amended(value: _T, **changes: Any) -> _T:
    """``dataclasses.replace`` without the check: ``value`` (checked when built) with
    ``changes`` made of its own parts or of values checked when built (a part dropped, the
    failure policy's reason, warnings joined)."""
    parts = {f.name: getattr(value, f.name) for f in fields(value)}  # type: ignore[arg-type]
    return assembled(type(value), **{**parts, **changes})
