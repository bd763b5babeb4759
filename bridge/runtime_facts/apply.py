"""What the runtime finally does with a merged result: the container it creates.

Used by the simulator and the test kit's `send_pod`, which have no OCI spec: the `Container`
message stands in for it.
Applying a merged `ContainerAdjustment` follows how containerd's generator uses
it (docs/protocol.md#removals, docs/protocol.md#ownership-and-conflicts): annotation, mount,
namespace, sysctl and net-device removals are honoured (removals first, then additions, so "-k" +
"k" means replace); env and device removal markers are ignored, so pre-existing entries
survive; hooks and CDI devices are appended; resources follow the one overlay rule
(bridge.contract.resource_overlay: set scalars replace, one hugepage limit per page size, unified
per key, device cgroup rules appended), the same function the bridge's state cache folds its
answers with; everything else replaces. Given the runtime (`runtime=`), only what that runtime
applies by that route is applied, with its side effects (bridge.contract.applied_view, from
the one field table: `memory.limit` in an adjustment sets swap to the limit,
`memory.swappiness` is ignored, ...).
Sans-IO.
"""

from __future__ import annotations

from collections.abc import Callable, MutableSequence
from typing import Any

from bridge.contract.applied_view import as_applied
from bridge.contract.resource_overlay import overlay_resources
from bridge.contract.runtime_effects import Route, Runtime
from bridge.proto.nri import api_pb2 as api

# The OCI hook lists a ContainerAdjustment can extend, in the order of the Hooks message.
HOOK_KINDS = ("prestart", "create_runtime", "create_container", "start_container",
              "poststart", "poststop")


def env_key(entry: str) -> str:
    return entry.split("=", 1)[0]


def set_env(env: MutableSequence[str], key: str, value: str) -> None:
    """Replace `key` in place (like the OCI generator's WithEnv), else append."""
    entry = f"{key}={value}"
    for index, existing in enumerate(env):
        if env_key(existing) == key:
            env[index] = entry
            return
    env.append(entry)


def apply_adjustment(container: api.Container, adjust: api.ContainerAdjustment,
                     runtime: Runtime | None = None) -> api.Container:
    """A copy of `container` with the merged adjustment applied (as `runtime` applies it, when
    given; else every field as NRI's message says)."""
    if runtime is not None:
        adjust = as_applied(adjust, Route.ADJUST, runtime).message
    out = api.Container()
    out.CopyFrom(container)
    # Sections are guarded by the (small) adjustment: touching a field of the
    # (large) copy materializes it, which costs microseconds per field.
    if adjust.annotations:
        _apply_map(out.annotations, adjust.annotations, _set_str)
    for mount in adjust.mounts:
        removed = mount.destination[1:] if mount.destination.startswith("-") else None
        _upsert(out.mounts, removed or mount.destination, lambda m: m.destination,
                None if removed else mount)
    for kv in adjust.env:
        if kv.key.startswith("-"):
            # Not forwarded by the adaptation; never deletes
            # (docs/protocol.md#ownership-and-conflicts).
            continue
        set_env(out.env, kv.key, kv.value)
    if adjust.HasField("hooks"):
        for kind in HOOK_KINDS:
            getattr(out.hooks, kind).extend(getattr(adjust.hooks, kind))
    if adjust.HasField("linux"):
        _apply_linux(out.linux, adjust.linux)
    for rlimit in adjust.rlimits:
        _upsert(out.rlimits, rlimit.type, lambda r: r.type, rlimit)
    for cdi in adjust.CDI_devices:
        _upsert(out.CDI_devices, cdi.name, lambda c: c.name, cdi)
    if adjust.args:
        del out.args[:]
        out.args.extend(adjust.args)
    return out


def _apply_linux(out: api.LinuxContainer, linux: api.LinuxContainerAdjustment) -> None:
    for device in linux.devices:
        if not device.path.startswith("-"):
            _upsert(out.devices, device.path, lambda d: d.path, device)
    if linux.HasField("resources"):
        overlay_resources(out.resources, linux.resources)
    if linux.cgroups_path:
        out.cgroups_path = linux.cgroups_path
    for name in ("oom_score_adj", "io_priority", "seccomp_policy", "scheduler"):
        if linux.HasField(name):
            getattr(out, name).CopyFrom(getattr(linux, name))
    for ns in linux.namespaces:
        removed = ns.type[1:] if ns.type.startswith("-") else None
        _upsert(out.namespaces, removed or ns.type, lambda n: n.type, None if removed else ns)
    if linux.sysctl:
        _apply_map(out.sysctl, linux.sysctl, _set_str)
    if linux.net_devices:
        _apply_map(out.net_devices, linux.net_devices, _set_msg)
    if linux.HasField("rdt"):
        if linux.rdt.remove:
            out.rdt.Clear()
        for name in ("clos_id", "schemata", "enable_monitoring"):
            if linux.rdt.HasField(name):
                getattr(out.rdt, name).CopyFrom(getattr(linux.rdt, name))


def apply_update(container: api.Container, update: api.ContainerUpdate,
                 runtime: Runtime | None = None, route: Route = Route.UPDATE) -> None:
    """Apply a ContainerUpdate's resources to a container in place (as `runtime` applies an
    update arriving by `route`, when given)."""
    if runtime is not None:
        update = as_applied(update, route, runtime).message
    overlay_resources(container.linux.resources, update.linux.resources)


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

