"""A decision's parts as the webhook contract's JSON, both ways.

Owns ``Adjustment`` <-> the ``adjust`` object (proto field names, only the set fields; the
typed fields first, ``Adjustment.extra`` laid over them) and ``ContainerUpdate`` <-> one
element of ``update``. To JSON builds the reply (``policy_server.engine.reply``); from JSON
builds a ValidateContainerAdjustment's ``Event.adjust`` and ``Event.update``
(``policy_server.engine.request``), every field the SDK does not type kept in ``extra``, so
``adjustment_from_json(adjustment_to_json(a)) == a``. In the SDK because a policy that
writes adjustments as JSON (the built-in ``cel``) needs the same conversion: JSON outside the
contract raises ``ValueError`` naming the field (the shape of its objects and lists here, the
values' types in the typed values built, the untyped rest in ``Adjustment.extra``), so no
caller checks it first. Must not merge or do I/O.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from policy_server.sdk.decision import REMOVAL_FIELDS, Adjustment, ContainerUpdate
from policy_server.sdk.limit_checks import read_list, read_object, read_objects
from policy_server.sdk.oci import Device, Hook, HookStage, Mount, Rlimit, StagedHook, hooks_to_json
from policy_server.sdk.resource_patch import ResourcePatch


def _mount_json(mount: Mount) -> dict[str, Any]:
    out: dict[str, Any] = {"destination": mount.destination}
    if mount.type:
        out["type"] = mount.type
    if mount.source:
        out["source"] = mount.source
    if mount.options:
        out["options"] = list(mount.options)
    return out


def _overlay(into: dict[str, Any], extra: Mapping[str, Any]) -> None:
    """``extra`` over ``into``: objects key by key, any other value replaces."""
    for key, value in extra.items():
        inner = into.get(key)
        if isinstance(value, Mapping) and isinstance(inner, dict):
            _overlay(inner, value)
        else:
            into[key] = copy.deepcopy(value)


def adjustment_to_json(adj: Adjustment) -> dict[str, Any]:
    """The reply's ``adjust`` object."""
    out: dict[str, Any] = {}
    if adj.env:
        out["env"] = [{"key": k, "value": v} for k, v in adj.env.items()]
    if adj.annotations:
        out["annotations"] = dict(adj.annotations)
    if adj.mounts:
        out["mounts"] = [_mount_json(m) for m in adj.mounts]
    if adj.hooks:
        out["hooks"] = hooks_to_json(adj.hooks)
    if adj.rlimits:
        out["rlimits"] = [r.to_json() for r in adj.rlimits]
    if adj.cdi_devices:
        out["CDI_devices"] = [{"name": name} for name in adj.cdi_devices]
    if adj.args is not None:
        out["args"] = list(adj.args)
    linux: dict[str, Any] = {}
    if adj.devices:
        linux["devices"] = [d.to_json() for d in adj.devices]
    resources = adj.resources.to_json()
    if resources:
        linux["resources"] = resources
    if adj.oom_score_adj is not None:
        linux["oom_score_adj"] = adj.oom_score_adj
    if adj.sysctl:
        linux["sysctl"] = dict(adj.sysctl)
    if linux:
        out["linux"] = linux
    remove = {key: list(values) for key, values in adj.removals().items()}
    if remove:
        out["remove"] = remove
    if adj.extra:
        _overlay(out, adj.extra)
    return out


def adjustment_from_json(adjust: Mapping[str, Any]) -> Adjustment:
    """The ``Adjustment`` for an ``adjust`` object (a validator's request, a CEL mutation); what
    the SDK does not type stays in ``extra``. JSON outside the contract raises ``ValueError``
    naming the field: its shape here (``read_object``), its values' types where they are built."""
    rest: dict[str, Any] = copy.deepcopy(dict(read_object(adjust, "adjust")))
    linux = dict(read_object(rest.pop("linux", None), "adjust/linux"))
    remove = dict(read_object(rest.pop("remove", None), "adjust/remove"))
    values: dict[str, Any] = {
        field: tuple(read_list(remove.pop(key), f"adjust/remove/{key}"))
        for key, field in REMOVAL_FIELDS.items() if key in remove
    }
    if "args" in rest:
        values["args"] = tuple(read_list(rest.pop("args"), "adjust/args"))
    if "oom_score_adj" in linux:
        values["oom_score_adj"] = linux.pop("oom_score_adj")
    hooks = read_object(rest.pop("hooks", None), "adjust/hooks")
    values.update(
        env={kv.get("key", ""): kv.get("value", "")
             for kv in read_objects(rest.pop("env", None), "adjust/env")},
        annotations=dict(read_object(rest.pop("annotations", None), "adjust/annotations")),
        mounts=tuple(
            Mount(m.get("destination", ""), m.get("type", ""), m.get("source", ""),
                  tuple(read_list(m.get("options"), "adjust/mounts/[]/options")))
            for m in read_objects(rest.pop("mounts", None), "adjust/mounts")
        ),
        resources=ResourcePatch.from_json(linux.pop("resources", None)),
        devices=tuple(
            Device(d.get("path", ""), d.get("type", ""), d.get("major", 0), d.get("minor", 0),
                   d.get("file_mode"), d.get("uid"), d.get("gid"))
            for d in read_objects(linux.pop("devices", None), "adjust/linux/devices")
        ),
        cdi_devices=tuple(c.get("name", "") for c in read_objects(rest.pop("CDI_devices", None),
                                                                  "adjust/CDI_devices")),
        hooks=tuple(
            StagedHook(HookStage(stage), Hook(
                h.get("path", ""), tuple(read_list(h.get("args"), f"adjust/hooks/{stage}/[]/args")),
                tuple(read_list(h.get("env"), f"adjust/hooks/{stage}/[]/env")), h.get("timeout")))
            for stage, staged in hooks.items()
            for h in read_objects(staged, f"adjust/hooks/{stage}")
        ),
        rlimits=tuple(
            Rlimit(r.get("type", ""), r.get("soft", 0), r.get("hard", 0))
            for r in read_objects(rest.pop("rlimits", None), "adjust/rlimits")
        ),
        sysctl=dict(read_object(linux.pop("sysctl", None), "adjust/linux/sysctl")),
    )
    if linux:
        rest["linux"] = linux
    if remove:
        rest["remove"] = remove
    return Adjustment(**values, extra=rest) if rest else Adjustment(**values)


def update_to_json(upd: ContainerUpdate) -> dict[str, Any]:
    """One element of the reply's ``update`` list."""
    out: dict[str, Any] = {"container_id": upd.container_id}
    resources = upd.resources.to_json()
    if resources:
        out["linux"] = {"resources": resources}
    if upd.ignore_failure:
        out["ignore_failure"] = True
    return out


def update_from_json(update: Mapping[str, Any]) -> ContainerUpdate:
    """The ``ContainerUpdate`` for one element of an ``update`` list (every field is typed)."""
    linux = update.get("linux") or {}
    return ContainerUpdate(
        update.get("container_id", ""),
        ResourcePatch.from_json(linux.get("resources"), "update/[]/linux/resources"),
        bool(update.get("ignore_failure", False)),
    )
