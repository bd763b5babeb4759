"""What a policy handler returns.

Owns the decision value types (frozen dataclasses): the adjustment, updates, evictions, the
reject, warnings and pushes, and the ``Decision`` that holds them with the node effects
(``policy_server.sdk.effects``). An ``Adjustment`` types the fields policies commonly
set; the rest of NRI's ``ContainerAdjustment`` (namespaces, net devices, I/O priority, seccomp
policy, scheduler, RDT, memory policy, cgroups path, ...) goes in its ``extra``: the reply's
``adjust`` JSON, checked against the webhook contract when the ``Adjustment`` is built, as the
bridge checks an HTTP reply's shape. ``policy_server.sdk.decision_merge`` merges several handlers'
decisions; ``policy_server.engine.reply`` turns the merged one into the reply body. Must not do
I/O or import web frameworks; policies may import it (it sits below the engine).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import orjson
from pydantic import ValidationError

from bridge.contract import WebhookReply
from policy_server.sdk.effects import Effect
from policy_server.sdk.oci import Device, Mount, Rlimit, StagedHook, no_strings
from policy_server.sdk.resource_patch import NO_RESOURCES, ResourcePatch

_NO_EXTRA: Mapping[str, Any] = MappingProxyType({})


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
        if self.extra:
            # As the reply is checked (policy_server.engine.reply.reply_body): its JSON.
            try:
                WebhookReply.model_validate_json(orjson.dumps({"adjust": self.extra}))
            except (TypeError, ValidationError) as exc:
                raise ValueError(f"Adjustment.extra is outside the contract: {exc}") from None

    def removals(self) -> Mapping[str, tuple[str, ...]]:
        """The reply's ``adjust.remove`` lists, by key (only the non-empty ones)."""
        lists = {
            "env": self.remove_env,
            "annotations": self.remove_annotations,
            "mounts": self.remove_mounts,
            "devices": self.remove_devices,
            "namespaces": self.remove_namespaces,
            "sysctl": self.remove_sysctl,
            "net_devices": self.remove_net_devices,
        }
        return {key: values for key, values in lists.items() if values}

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


@dataclass(frozen=True, slots=True)
class Eviction:
    """A ``ContainerEviction``."""

    container_id: str
    reason: str = ""


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
