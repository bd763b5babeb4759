"""What the runtime finally does with a merged result: the container it creates.

The simulator has no OCI spec, so the `Container` message stands in for it.
Applying a merged `ContainerAdjustment` follows how containerd's generator uses
it (protocol §7.1-§7.2): annotation, mount, namespace, sysctl and net-device
removals are honoured (removals first, then additions, so "-k" + "k" means
replace); env and device removal markers are ignored, so pre-existing entries
survive; hooks, CDI devices and device cgroup rules are appended; everything
else replaces. Sans-IO.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bridge.proto.nri import api_pb2 as api
from bridge.simulator.merge import HOOK_KINDS, env_key
from bridge.simulator.resources import merge_resources, overlay_resources


def apply_adjustment(container: api.Container, adjust: api.ContainerAdjustment) -> api.Container:
    """A copy of `container` with the merged adjustment applied."""
    out = api.Container()
    out.CopyFrom(container)
    _apply_map(out.annotations, adjust.annotations, _set_str)
    for mount in adjust.mounts:
        removed = mount.destination[1:] if mount.destination.startswith("-") else None
        _upsert(out.mounts, removed or mount.destination, lambda m: m.destination,
                None if removed else mount)
    for kv in adjust.env:
        if kv.key.startswith("-"):
            continue  # not forwarded by the adaptation; never deletes (protocol §7.2)
        _set_env(out.env, kv.key, kv.value)
    for kind in HOOK_KINDS:
        getattr(out.hooks, kind).extend(getattr(adjust.hooks, kind))
    linux = adjust.linux
    for device in linux.devices:
        if not device.path.startswith("-"):
            _upsert(out.linux.devices, device.path, lambda d: d.path, device)
    if linux.HasField("resources"):
        merge_resources(linux.resources, (out.linux.resources,))
    if linux.cgroups_path:
        out.linux.cgroups_path = linux.cgroups_path
    for name in ("oom_score_adj", "io_priority", "seccomp_policy", "scheduler"):
        if linux.HasField(name):
            getattr(out.linux, name).CopyFrom(getattr(linux, name))
    for ns in linux.namespaces:
        removed = ns.type[1:] if ns.type.startswith("-") else None
        _upsert(out.linux.namespaces, removed or ns.type, lambda n: n.type,
                None if removed else ns)
    _apply_map(out.linux.sysctl, linux.sysctl, _set_str)
    _apply_map(out.linux.net_devices, linux.net_devices, _set_msg)
    if linux.HasField("rdt"):
        if linux.rdt.remove:
            out.linux.rdt.Clear()
        for name in ("clos_id", "schemata", "enable_monitoring"):
            if linux.rdt.HasField(name):
                getattr(out.linux.rdt, name).CopyFrom(getattr(linux.rdt, name))
    for rlimit in adjust.rlimits:
        _upsert(out.rlimits, rlimit.type, lambda r: r.type, rlimit)
    for cdi in adjust.CDI_devices:
        _upsert(out.CDI_devices, cdi.name, lambda c: c.name, cdi)
    if adjust.args:
        del out.args[:]
        out.args.extend(adjust.args)
    return out


def apply_update(container: api.Container, update: api.ContainerUpdate) -> None:
    """Apply a ContainerUpdate's resources to a container in place."""
    overlay_resources(container.linux.resources, update.linux.resources)


def _set_env(env: Any, key: str, value: str) -> None:
    """Replace `key` in place (like the OCI generator's WithEnv), else append."""
    entry = f"{key}={value}"
    for index, existing in enumerate(env):
        if env_key(existing) == key:
            env[index] = entry
            return
    env.append(entry)


def _apply_map(target: Any, changes: Any, put: Callable[[Any, str, Any], None]) -> None:
    for key in changes:
        if key.startswith("-") and key[1:] in target:
            del target[key[1:]]
    for key in changes:
        if not key.startswith("-"):
            put(target, key, changes[key])


def _upsert(seq: Any, key: str, key_of: Callable[[Any], str], item: Any | None) -> None:
    """Replace the entry with `key` by `item` in place (append if new; drop if item is None)."""
    for index, existing in enumerate(seq):
        if key_of(existing) == key:
            if item is None:
                del seq[index]
            else:
                existing.CopyFrom(item)
            return
    if item is not None:
        seq.add().CopyFrom(item)


def _set_str(target: Any, key: str, value: Any) -> None:
    target[key] = value


def _set_msg(target: Any, key: str, value: Any) -> None:
    target[key].CopyFrom(value)

