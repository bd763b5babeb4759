"""Combining plugin responses into one event result, as NRI's `result.go` does.

`CreateResult` folds CreateContainerResponses (plugins in index order) into
one merged `ContainerAdjustment` plus per-container updates, and mutates the
request's container in place so each plugin sees the earlier plugins' changes
(docs/protocol.md#ownership-and-conflicts). `UpdateResult` folds the `update` lists of
UpdateContainer / StopContainer / CreateContainer responses.

Rules (docs/protocol.md#removals, docs/protocol.md#ownership-and-conflicts,
docs/protocol.md#updates):
- a `-` prefix on the key removes: annotations, mounts, env, devices,
  namespaces, sysctl, net devices; removal + re-add in one response overrides
  another plugin's entry; env and device removals only hide the entry from
  later plugins and are not forwarded, so a pre-existing entry survives;
- every set field is claimed; a second claim in the same event is a conflict,
  including two claims in one response (`MergeError`, the operation fails);
- hooks are appended (owners accumulate), rlimits, CDI devices and hugepage
  limits are claimed per key and appended, `args` starting with "" override;
- an update targeting the container being created is an error;
- updates with `ignore_failure` that fail to merge are dropped for that
  plugin; the merged flag is the AND of the contributors';
- a response that sets off one of the profile's hazards (bridge.contract.runtime_hazards: an
  added sysctl on NRI v0.11.x) crashes the runtime (`RuntimeCrashed`), as the real merge
  panics there.

Sans-IO.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, MutableSequence
from typing import Any, TypeVar

from google.protobuf.message import Message

from bridge.contract.runtime_hazards import Hazard
from bridge.proto.nri import api_pb2 as api
from bridge.runtime_facts.apply import HOOK_KINDS, env_key, set_env
from bridge.runtime_facts.linux_resources import merge_resources
from bridge.simulator.ownership import MergeError, Ownership

T = TypeVar("T")
M = TypeVar("M", bound=Message)


class F:
    """Field enum values as plain ints (EnumTypeWrapper attribute access is slow)."""

    Annotations = int(api.Field.Value("Annotations"))
    Mounts = int(api.Field.Value("Mounts"))
    OciHooks = int(api.Field.Value("OciHooks"))
    Devices = int(api.Field.Value("Devices"))
    CdiDevices = int(api.Field.Value("CdiDevices"))
    Env = int(api.Field.Value("Env"))
    Args = int(api.Field.Value("Args"))
    CgroupsPath = int(api.Field.Value("CgroupsPath"))
    OomScoreAdj = int(api.Field.Value("OomScoreAdj"))
    Rlimits = int(api.Field.Value("Rlimits"))
    IoPriority = int(api.Field.Value("IoPriority"))
    SeccompPolicy = int(api.Field.Value("SeccompPolicy"))
    Namespace = int(api.Field.Value("Namespace"))
    Sysctl = int(api.Field.Value("Sysctl"))
    LinuxNetDevices = int(api.Field.Value("LinuxNetDevices"))
    LinuxSched = int(api.Field.Value("LinuxSched"))
    RdtClosID = int(api.Field.Value("RdtClosID"))
    RdtSchemata = int(api.Field.Value("RdtSchemata"))
    RdtEnableMonitoring = int(api.Field.Value("RdtEnableMonitoring"))
    MemoryPolicy = int(api.Field.Value("MemoryPolicy"))


_SINGLE_LINUX_FIELDS = (("oom_score_adj", F.OomScoreAdj, True),
                        ("io_priority", F.IoPriority, True),
                        ("seccomp_policy", F.SeccompPolicy, True),
                        ("scheduler", F.LinuxSched, True),
                        ("memory_policy", F.MemoryPolicy, False))

__all__ = ["CreateResult", "MergeError", "RuntimeCrashed", "UpdateResult"]


class RuntimeCrashed(Exception):
    """A plugin's response made the runtime panic: the process is gone, and every plugin with
    it. The message is the panic and where it happens."""


def _removal(key: str) -> str | None:
    return key[1:] if key.startswith("-") else None


def _replace(seq: MutableSequence[Any], items: Iterable[Any]) -> None:
    kept = list(items)
    del seq[:]
    seq.extend(kept)


class UpdateResult:
    """Merged ContainerUpdates of one event, keyed by target container id."""

    def __init__(self, owners: Ownership, *, creating: str = "",
                 pending: api.ContainerUpdate | None = None) -> None:
        self._owners = owners
        self._creating = creating
        self._pending = pending
        self._updates: dict[str, api.ContainerUpdate] = {}
        if pending is not None:
            self._updates[pending.container_id] = pending

    def add(self, plugin: str, updates: Iterable[api.ContainerUpdate]) -> None:
        for update in updates:
            target_id = update.container_id
            if self._creating and target_id == self._creating:
                raise MergeError(f'plugin "{plugin}" asked update of "{target_id}" during creation')
            current = self._updates.get(target_id)
            if current is None:
                current = api.ContainerUpdate(container_id=target_id,
                                              ignore_failure=update.ignore_failure)
            candidate = api.ContainerUpdate()
            candidate.CopyFrom(current)
            snapshot = self._owners.snapshot()
            try:
                # Quirk kept from NRI HEAD: pids in a ContainerUpdate is not merged.
                merge_resources(update.linux.resources, (candidate.linux.resources,),
                                self._claimer(target_id, plugin), with_pids=False)
            except MergeError:
                self._owners.restore(snapshot)
                if not update.ignore_failure:
                    raise
                continue  # that plugin's changes to that container are dropped
            candidate.ignore_failure = current.ignore_failure and update.ignore_failure
            if self._pending is not None and target_id == self._pending.container_id:
                self._pending.CopyFrom(candidate)
                candidate = self._pending
            self._updates[target_id] = candidate

    def result(self) -> list[api.ContainerUpdate]:
        """Updates for other containers, then the pending update (effective) last."""
        pending_id = self._pending.container_id if self._pending is not None else None
        out = [u for cid, u in self._updates.items() if cid != pending_id]
        if self._pending is not None:
            out.append(self._pending)
        return out

    def _claimer(self, container_id: str, plugin: str) -> Callable[[int, str | None], None]:
        def claim(field: int, key: str | None) -> None:
            self._owners.claim(container_id, field, plugin, key)
        return claim


class CreateResult:
    """The merged outcome of one CreateContainer across plugins."""

    def __init__(self, container: api.Container, hazards: tuple[Hazard, ...] = ()) -> None:
        self.container = container  # the request view, mutated for later plugins
        self.hazards = hazards  # the runtime's (RuntimeProfile.hazards)
        self.id = container.id
        self.owners = Ownership()
        self.adjust = api.ContainerAdjustment()
        self.updates = UpdateResult(self.owners, creating=container.id)

    def apply(self, plugin: str, response: api.CreateContainerResponse) -> None:
        """Fold one plugin's response in; raises MergeError on a conflict, RuntimeCrashed
        on a response that sets off one of the runtime's hazards."""
        for hazard in self.hazards:
            if hazard.set_off_by(response.adjust):
                raise RuntimeCrashed(f"{hazard.panic} merging {hazard.path} from plugin "
                                     f"{plugin} ({hazard.upstream})")
        if response.HasField("adjust"):
            self._adjust(plugin, response.adjust)
        self.updates.add(plugin, response.update)

    def response(self) -> api.CreateContainerResponse:
        return api.CreateContainerResponse(adjust=self.adjust, update=self.updates.result())

    # -- adjustment sections (as in result.go) --------------------------------------

    def _adjust(self, plugin: str, adj: api.ContainerAdjustment) -> None:
        # Every section is skipped when empty: most responses touch one or two.
        view, out, cid = self.container, self.adjust, self.id
        if adj.annotations:
            self._merge_map(plugin, F.Annotations, adj.annotations, view.annotations,
                            out.annotations, _set_str)
        if adj.mounts:
            self._mounts(plugin, adj.mounts)
        if adj.env:
            self._env(plugin, adj.env)
        if adj.HasField("hooks"):
            self._hooks(plugin, adj.hooks)
        for cdi in adj.CDI_devices:
            self.owners.claim(cid, F.CdiDevices, plugin, cdi.name)
            view.CDI_devices.add().CopyFrom(cdi)
            out.CDI_devices.add().CopyFrom(cdi)
        for rlimit in adj.rlimits:
            self.owners.claim(cid, F.Rlimits, plugin, rlimit.type)
            view.rlimits.add().CopyFrom(rlimit)
            out.rlimits.add().CopyFrom(rlimit)
        if adj.HasField("linux"):
            self._linux(plugin, adj.linux)
        if adj.args:
            args = list(adj.args)
            if args[0] == "":
                self.owners.clear(cid, F.Args, plugin)
                args = args[1:]
            self.owners.claim(cid, F.Args, plugin)
            _replace(view.args, args)
            _replace(out.args, args)

    def _linux(self, plugin: str, linux: api.LinuxContainerAdjustment) -> None:
        view, out, cid = self.container, self.adjust, self.id
        if linux.devices:
            self._devices(plugin, linux.devices)
        if linux.namespaces:
            self._namespaces(plugin, linux.namespaces)
        if linux.sysctl:
            self._merge_map(plugin, F.Sysctl, linux.sysctl, view.linux.sysctl,
                            out.linux.sysctl, _set_str)
        if linux.net_devices:
            self._merge_map(plugin, F.LinuxNetDevices, linux.net_devices,
                            view.linux.net_devices, out.linux.net_devices, _set_msg)
        if linux.HasField("resources"):
            merge_resources(linux.resources, (view.linux.resources, out.linux.resources),
                            lambda field, key: self.owners.claim(cid, field, plugin, key))
        if linux.cgroups_path:
            self.owners.claim(cid, F.CgroupsPath, plugin)
            view.linux.cgroups_path = out.linux.cgroups_path = linux.cgroups_path
        for name, field, in_view in _SINGLE_LINUX_FIELDS:
            if linux.HasField(name):
                self.owners.claim(cid, field, plugin)
                getattr(out.linux, name).CopyFrom(getattr(linux, name))
                if in_view:
                    getattr(view.linux, name).CopyFrom(getattr(linux, name))
        if linux.HasField("rdt"):
            self._rdt(plugin, linux.rdt)

    def _merge_map(self, plugin: str, field: int, src: Any, view: Any, out: Any,
                   put: Callable[[Any, str, Any], None]) -> None:
        """Annotations, sysctl, net devices: per-key claims, "-k" removal, "-k"+"k" replace."""
        removed = {key for key in map(_removal, src) if key is not None}
        for key in sorted(src):
            if key.startswith("-"):
                continue
            if key in removed:
                self.owners.clear(self.id, field, plugin, key)
                _discard(view, key)
                put(out, "-" + key, None)
                removed.discard(key)
            self.owners.claim(self.id, field, plugin, key)
            put(view, key, src[key])
            put(out, key, src[key])
        for key in sorted(removed):
            # A removal-only "-k" is not ownership-checked.
            _discard(view, key)
            put(out, "-" + key, None)

    def _mounts(self, plugin: str, mounts: Iterable[api.Mount]) -> None:
        removed, added = _split(mounts, lambda m: m.destination)
        if removed:
            self._undo(plugin, F.Mounts, self.adjust.mounts, removed, lambda m: m.destination)
            _replace(self.container.mounts,
                     [_clone(m) for m in self.container.mounts if m.destination not in removed])
        for mount in added:
            self.owners.claim(self.id, F.Mounts, plugin, mount.destination)
            self.adjust.mounts.add().CopyFrom(mount)
            self.container.mounts.add().CopyFrom(mount)
            removed.discard(mount.destination)
        for destination in sorted(removed):
            # Mount removals without a re-add are forwarded to the runtime.
            self.adjust.mounts.add(destination="-" + destination)

    def _env(self, plugin: str, env: Iterable[api.KeyValue]) -> None:
        removed, added = _split(env, lambda kv: kv.key)
        view = self.container.env
        if removed:
            self._undo(plugin, F.Env, self.adjust.env, removed, lambda kv: kv.key)
            _replace(view, [e for e in view if env_key(e) not in removed])
        for kv in added:
            self.owners.claim(self.id, F.Env, plugin, kv.key)
            self.adjust.env.add().CopyFrom(kv)
            set_env(view, kv.key, kv.value)
        # Env removals are not forwarded: a pre-existing variable stays
        # (docs/protocol.md#ownership-and-conflicts).

    def _devices(self, plugin: str, devices: Iterable[api.LinuxDevice]) -> None:
        removed, added = _split(devices, lambda d: d.path)
        view = self.container.linux.devices
        if removed:
            self._undo(plugin, F.Devices, self.adjust.linux.devices, removed, lambda d: d.path)
            _replace(view, [_clone(d) for d in view if d.path not in removed])
        for device in added:
            self.owners.claim(self.id, F.Devices, plugin, device.path)
            self.adjust.linux.devices.add().CopyFrom(device)
            _replace(view, [_clone(d) for d in view if d.path != device.path] + [device])
        # Device removals are not forwarded either.

    def _namespaces(self, plugin: str, namespaces: Iterable[api.LinuxNamespace]) -> None:
        view = self.container.linux.namespaces
        for ns in namespaces:
            kind = _removal(ns.type)
            name = kind if kind is not None else ns.type
            self.owners.claim(self.id, F.Namespace, plugin, name)  # add and remove both claim
            self.adjust.linux.namespaces.add().CopyFrom(ns)
            kept = [_clone(n) for n in view if n.type != name]
            _replace(view, kept if kind is not None else [*kept, ns])

    def _hooks(self, plugin: str, hooks: api.Hooks) -> None:
        added = False
        for kind in HOOK_KINDS:
            entries = getattr(hooks, kind)
            if entries:
                added = True
                getattr(self.container.hooks, kind).extend(entries)
                getattr(self.adjust.hooks, kind).extend(entries)
        if added:
            self.owners.accumulate(self.id, F.OciHooks, plugin)

    def _rdt(self, plugin: str, rdt: api.LinuxRdt) -> None:
        out, view = self.adjust.linux.rdt, self.container.linux.rdt
        fields = (("clos_id", F.RdtClosID), ("schemata", F.RdtSchemata),
                  ("enable_monitoring", F.RdtEnableMonitoring))
        if rdt.remove:
            for _, field in fields:
                self.owners.clear(self.id, field, plugin)
            out.Clear()
            view.Clear()
            out.remove = True
        for name, field in fields:
            if rdt.HasField(name):
                self.owners.claim(self.id, field, plugin)
                getattr(out, name).CopyFrom(getattr(rdt, name))
                getattr(view, name).CopyFrom(getattr(rdt, name))
                out.remove = False

    def _undo(self, plugin: str, field: int, collected: Any, removed: set[str],
              key_of: Callable[[Any], str]) -> None:
        """A removal un-does earlier plugins' additions and clears their ownership."""
        kept = []
        for item in collected:
            key = key_of(item)
            if key in removed:
                self.owners.clear(self.id, field, plugin, key)
                continue
            kept.append(_clone(item))
        _replace(collected, kept)


def _split(items: Iterable[T], key_of: Callable[[T], str]) -> tuple[set[str], list[T]]:
    removed: set[str] = set()
    added: list[T] = []
    for item in items:
        key = _removal(key_of(item))
        if key is not None:
            removed.add(key)
        else:
            added.append(item)
    return removed, added


def _clone(msg: M) -> M:
    copy = type(msg)()
    copy.CopyFrom(msg)
    return copy


def _discard(mapping: Any, key: str) -> None:
    # Never index a protobuf map with a missing key: that inserts it.
    if key in mapping:
        del mapping[key]


def _set_str(target: Any, key: str, value: Any) -> None:
    target[key] = "" if value is None else value


def _set_msg(target: Any, key: str, value: Any) -> None:
    if value is None:
        target[key].Clear()
    else:
        target[key].CopyFrom(value)
