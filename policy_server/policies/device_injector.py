"""``device-injector``: devices, mounts and CDI devices for a container from pod annotations.

Owns the annotation formats (the keys of NRI's sample device-injector) and the allow lists that
keep an annotation from granting arbitrary host access:

- ``devices.noderesource.dev/container.<name>`` (or ``/pod``): a YAML list of device paths or
  ``{path, type, major, minor, file_mode, uid, gid}``. The path must match ``allowed_devices``;
  type and device numbers are taken from the host's device node at that path (an annotation
  cannot name ``/dev/null`` and hand out another device's numbers: given ones must agree).
- ``mounts.noderesource.dev/container.<name>``: a list of ``{source, destination, type,
  options}``. A bind source must resolve (symlinks followed) to a path under one of
  ``allowed_mount_sources``, and the resolved path is what the runtime mounts; other types must
  be listed in ``allowed_mount_types``.
- ``cdi-devices.noderesource.dev/container.<name>``: a list of fully qualified CDI names
  (``vendor.com/class=name``) matching ``allowed_cdi_devices``.

Everything is refused by default (empty allow lists), and only pods of the namespaces the
configuration lists (``namespaces``; none by default, ``*`` for all) may ask at all: a device,
host mount or CDI device is root-equivalent on the node, so the operator names who may have
one (docs/security.md#pod-metadata-is-input-not-authority). A bad or disallowed request rejects
CreateContainer with a reason naming the annotation. The one place this policy looks at the
host is ``HostView`` (a stat of a device node, a realpath of a mount source), done per request
because device nodes and directories come and go. The webhook needs ``allow: [devices]``,
``[mounts]`` and/or ``[cdi_devices]``.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import policy_server.policies.pod_annotations as notes
from policy_server.policies.pod_annotations import PodAnnotationError
from policy_server.policies.policy_config import (
    NonEmptyString,
    PolicyConfig,
    PolicySettings,
    Strings,
    describe_value,
)
from policy_server.sdk import (
    Adjustment,
    Decision,
    Device,
    Event,
    EventName,
    FailurePolicy,
    Mount,
    Policy,
    nri_version_of,
)

NAME = "device-injector"
DESCRIPTION = "devices, mounts and CDI devices from pod annotations, within allow lists"
DEVICES = "devices.noderesource.dev"
MOUNTS = "mounts.noderesource.dev"
CDI_DEVICES = "cdi-devices.noderesource.dev"

_WHAT = {DEVICES: "devices", MOUNTS: "host mounts", CDI_DEVICES: "CDI devices"}
# The pod annotation domains this policy reads (``<domain>/container.<name>``, ``<domain>/pod``):
# policies.trusted_keys declares them for the admission policy.
DOMAINS = (DEVICES, MOUNTS, CDI_DEVICES)
_DEVICE_FIELDS = frozenset({"path", "type", "major", "minor", "file_mode", "uid", "gid"})
_MOUNT_FIELDS = frozenset({"source", "destination", "type", "options"})
# ContainerAdjustment.CDI_devices exists from NRI v0.7.0; an older runtime drops the field
# without a word, so the container would start without its device (used when the envelope
# carries no runtime capabilities).
CDI_MIN_NRI = (0, 7, 0)
# vendor/class=name, as the CDI specification spells a fully qualified device name.
_CDI_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9.-]*/[a-zA-Z0-9][a-zA-Z0-9_.-]*=[a-zA-Z0-9_.:-]+$")


@dataclass(frozen=True, slots=True)
class HostDevice:
    type: str  # "c" or "b"
    major: int
    minor: int


class HostView:
    """The host as this process sees it under ``root`` (``/``, or e.g. ``/host`` in a pod)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _on_host(self, path: str) -> str:
        return str(self.root / path.lstrip("/"))

    def device(self, path: str) -> HostDevice | None:
        try:
            st = os.stat(self._on_host(path))
        except OSError:
            return None
        if stat.S_ISCHR(st.st_mode):
            return HostDevice("c", os.major(st.st_rdev), os.minor(st.st_rdev))
        if stat.S_ISBLK(st.st_mode):
            return HostDevice("b", os.major(st.st_rdev), os.minor(st.st_rdev))
        return None

    def resolve(self, path: str) -> str:
        """``path`` with every symlink followed, as a host path."""
        real = os.path.realpath(self._on_host(path))
        root = os.path.realpath(self.root)
        return "/" + os.path.relpath(real, root) if real != root else "/"


@dataclass(frozen=True, slots=True)
class InjectorRules:
    """The configuration: allow lists and the host view."""

    allowed_devices: tuple[str, ...]
    allowed_mount_sources: tuple[str, ...]
    allowed_mount_types: frozenset[str]
    allowed_cdi_devices: tuple[str, ...]
    host: HostView
    namespaces: notes.NamespaceScope


def _abs_path(key: str, where: str, value: object) -> str:
    if not isinstance(value, str) or not value.startswith("/"):
        raise PodAnnotationError(key, f"{where}: expected an absolute path, got {value!r}")
    if ".." in value.split("/"):
        raise PodAnnotationError(key, f"{where}: {value!r} contains '..'")
    if "\0" in value:
        raise PodAnnotationError(key, f"{where}: {value!r} contains a NUL byte")
    return posixpath.normpath(value)


def _device(rules: InjectorRules, key: str, i: int, item: object) -> Device:
    where = f"item {i}"
    if isinstance(item, str):
        item = {"path": item}
    if not isinstance(item, dict):
        raise PodAnnotationError(key, f"{where}: expected a device path or a mapping with a path")
    notes.check_fields(key, where, item, _DEVICE_FIELDS)
    path = _abs_path(key, f"{where}.path", item.get("path"))
    if not any(fnmatch.fnmatchcase(path, pattern) for pattern in rules.allowed_devices):
        raise PodAnnotationError(
            key, f"device {path} is not allowed on this node (allowed_devices)")
    host = rules.host.device(path)
    if host is None:
        raise PodAnnotationError(key, f"device {path} does not exist on this node")
    for field, actual in (("type", host.type), ("major", host.major), ("minor", host.minor)):
        if field in item and item[field] != actual:
            raise PodAnnotationError(
                key, f"device {path}: {field} {item[field]!r} does not match the host's {actual!r}"
            )
    optional = {
        f: notes.non_negative_int(key, f"{where}.{f}", item[f])
        for f in ("uid", "gid")
        if item.get(f) is not None
    }
    mode = _file_mode(key, f"{where}.file_mode", item.get("file_mode"))
    return Device(path, host.type, host.major, host.minor, file_mode=mode, **optional)


def _file_mode(key: str, where: str, value: object) -> int | None:
    """An integer, or an octal string (``"0666"``, ``"0o666"``) as people write modes."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = int(value.removeprefix("0o"), 8)
        except ValueError:
            raise PodAnnotationError(key, f"{where}: {value!r} is not an octal mode") from None
    mode = notes.non_negative_int(key, where, value)
    if mode > 0o7777:
        raise PodAnnotationError(key, f"{where}: {oct(mode)} is not a file mode")
    return mode


def _under(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _mount(rules: InjectorRules, key: str, i: int, item: object) -> Mount:
    where = f"item {i}"
    if not isinstance(item, dict):
        raise PodAnnotationError(key, f"{where}: expected a mapping with source and destination")
    notes.check_fields(key, where, item, _MOUNT_FIELDS)
    destination = _abs_path(key, f"{where}.destination", item.get("destination"))
    if destination == "/":
        raise PodAnnotationError(key, f"{where}.destination: cannot mount over the container's /")
    kind = item.get("type", "bind")
    options = item.get("options", [])
    if not isinstance(kind, str) or not kind:
        raise PodAnnotationError(
            key, f"{where}.type: expected a string, got {describe_value(kind)}")
    if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
        raise PodAnnotationError(key, f"{where}.options: expected a list of strings")
    is_bind = kind == "bind" or "bind" in options or "rbind" in options
    if not is_bind:
        if kind not in rules.allowed_mount_types:
            raise PodAnnotationError(
                key, f"mount type {kind!r} is not allowed on this node (allowed_mount_types)"
            )
        source = item.get("source", kind)
        if not isinstance(source, str):
            raise PodAnnotationError(key, f"{where}.source: expected a string")
        return Mount(destination, kind, source, tuple(options))
    source = _abs_path(key, f"{where}.source", item.get("source"))
    real = rules.host.resolve(source)
    if not any(_under(real, allowed) for allowed in rules.allowed_mount_sources):
        shown = source if real == source else f"{source} (resolves to {real})"
        raise PodAnnotationError(
            key, f"mount source {shown} is not allowed on this node (allowed_mount_sources)"
        )
    if "bind" not in options and "rbind" not in options:
        options = [*options, "rbind"]  # runc bind-mounts only with a bind option
    # The resolved path, not the checked one: a symlink swapped after the check cannot
    # redirect the mount.
    return Mount(destination, "bind", real, tuple(options))


def _cdi(rules: InjectorRules, key: str, i: int, item: object) -> str:
    if not isinstance(item, str) or not _CDI_NAME.match(item):
        raise PodAnnotationError(
            key, f"item {i}: expected a CDI device name like vendor.com/class=name, got {item!r}"
        )
    if not any(fnmatch.fnmatchcase(item, pattern) for pattern in rules.allowed_cdi_devices):
        raise PodAnnotationError(
            key, f"CDI device {item} is not allowed on this node (allowed_cdi_devices)"
        )
    return item


def _identity(item: Device | Mount | str) -> str:
    """What NRI owns an entry by: device path, mount destination, CDI name."""
    if isinstance(item, Device):
        return item.path
    if isinstance(item, Mount):
        return item.destination
    return item


def _parse(rules: InjectorRules, event: Event, domain: str, parse: Any) -> tuple[Any, ...]:
    request = notes.find(event, domain)
    if request is None:
        return ()
    refused = rules.namespaces.refusal(event, request.key, _WHAT[domain])
    if refused is not None:
        raise refused
    items = [parse(rules, request.key, i, item) for i, item in enumerate(notes.as_list(request))]
    seen: set[str] = set()
    for item in items:
        if _identity(item) in seen:
            raise PodAnnotationError(request.key, f"{_identity(item)} is given twice")
        seen.add(_identity(item))
    return tuple(items)


def _check_runtime_carries_cdi(event: Event) -> None:
    """Refuse CDI devices the runtime would drop: its capabilities say so (sent by the bridge),
    or, from an older bridge, its NRI version inferred from the runtime's name and version."""
    nri = nri_version_of(event.runtime_name, event.runtime_version, event.runtime_nri_version)
    if event.runtime_capabilities is not None:
        dropped = "CDI_devices" not in event.runtime_capabilities
    else:
        dropped = nri is not None and nri < CDI_MIN_NRI
    request = notes.find(event, CDI_DEVICES)
    if dropped and request is not None:
        shown = ".".join(map(str, nri)) if nri is not None else "an NRI version"
        raise PodAnnotationError(
            request.key,
            f"CDI devices need NRI 0.7 or later; {event.runtime_name} {event.runtime_version} "
            f"speaks NRI {shown} and would start the container without them",
        )


class _Config(PolicyConfig):
    allowed_devices: Strings = None
    allowed_mount_sources: Strings = None
    allowed_mount_types: Strings = None
    allowed_cdi_devices: Strings = None
    host_root: NonEmptyString = "/"
    namespaces: Strings = None


def _rules_from(settings: PolicySettings) -> InjectorRules:
    config = settings.parse(_Config)
    devices = config.allowed_devices or ()
    for i, pattern in enumerate(devices):
        if not pattern.startswith("/dev/"):
            raise settings.error(f"allowed_devices[{i}]", f"expected a /dev/ path, got {pattern!r}")
    sources = config.allowed_mount_sources or ()
    for i, source in enumerate(sources):
        if not source.startswith("/") or source == "/" or ".." in source.split("/"):
            raise settings.error(
                f"allowed_mount_sources[{i}]", f"expected an absolute directory below /, "
                f"got {source!r}"
            )  # fmt: skip
    return InjectorRules(
        allowed_devices=devices,
        allowed_mount_sources=tuple(posixpath.normpath(s) for s in sources),
        allowed_mount_types=frozenset(config.allowed_mount_types or ()),
        allowed_cdi_devices=config.allowed_cdi_devices or (),
        host=HostView(Path(config.host_root)),
        namespaces=notes.NamespaceScope.of(config.namespaces),
    )


def build(settings: PolicySettings) -> Policy[InjectorRules]:
    rules = _rules_from(settings)
    # A bug in here must not start the container without what it asked for.
    policy = Policy(
        NAME, context=lambda: rules, description=DESCRIPTION, failure_policy=FailurePolicy.FAIL
    )

    @policy.on(EventName.CREATE_CONTAINER)
    def devices(event: Event, rules: InjectorRules) -> Decision | None:
        try:
            nodes = _parse(rules, event, DEVICES, _device)
            mounts = _parse(rules, event, MOUNTS, _mount)
            cdi = _parse(rules, event, CDI_DEVICES, _cdi)
            if cdi:
                _check_runtime_carries_cdi(event)
        except PodAnnotationError as exc:
            return Decision(reject=str(exc))
        if not (nodes or mounts or cdi):
            return None
        return Decision(adjust=Adjustment(devices=nodes, mounts=mounts, cdi_devices=cdi))

    return policy
