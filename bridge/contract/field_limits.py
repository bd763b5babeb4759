"""What a request's strings may hold: one table of limits, read by the request decoder.

Every string of a webhook request (each field, list item, map key and map value of the envelope
and of every NRI message it carries) obeys one ``FieldLimit``: a length bound, which control
characters it may hold and, for the fields that name a file or a cgroup, a path shape. The
table (``FIELDS``) names the fields whose limit is not the default; everything else is
``TEXT`` and every map key is a ``NAME``. The msgspec Structs (request_structs) take the length
bound into their types; the policy server's decoder checks the rest
(policy_server.engine.request_fields). docs/webhooks.md ("Field limits") is the contract.

The bounds: ``TEXT`` 256 KiB (Kubernetes' limit on all of a pod's annotations together; a
kernel refuses an argument or environment string over 128 KiB), ``NAME`` 1 KiB (Kubernetes'
longest names are 253 characters, label and annotation keys 317), paths 4 KiB (``PATH_MAX``).
Control characters are U+0000-U+001F and U+007F; free text may hold tab, line feed and carriage
return (kubectl's last-applied-configuration annotation, ``sh -c`` scripts in ``args``),
nothing else may.

Owns the limits and how a value breaks one. Must not: decode, or know who asks.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

# C0 controls and DEL; TEXT allows \t \n \r.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_CONTROL_IN_TEXT = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


@dataclass(frozen=True, slots=True)
class FieldLimit:
    """How long a string may be (characters), whether it may hold tab, line feed and carriage
    return, and its path shape (``shape(value)``: what is wrong, None: nothing)."""

    kind: str
    max_length: int
    newlines: bool = False
    shape: Callable[[str], str | None] | None = None


def _dots(value: str, separators: str = "/") -> str | None:
    if ".." not in value:
        return None  # the common case, without splitting
    for sep in separators[1:]:
        value = value.replace(sep, separators[0])
    return "has a `..` component" if ".." in value.split(separators[0]) else None


def absolute_path(value: str) -> str | None:
    """A file path: empty (unset), or absolute without ``..`` components."""
    if value and value[0] != "/":
        return "is not an absolute path"
    return _dots(value)


def cgroup_path(value: str) -> str | None:
    """A cgroup: empty, an absolute path (cgroupfs driver), or systemd's ``a-b.slice`` /
    ``slice:prefix:id`` form without a ``/`` (bridge.contract.systemd_slice); no ``..``
    component between ``/`` or ``:``."""
    if value and value[0] != "/" and "/" in value:
        return "is neither an absolute path nor a systemd slice name"
    return _dots(value, "/:")


def relative_ref(value: str) -> str | None:
    """A mount source (``tmpfs``, a host path) or a profile reference: no ``..`` component."""
    return _dots(value)


TEXT = FieldLimit("text", 256 << 10, newlines=True)
NAME = FieldLimit("name", 1 << 10)
PATH = FieldLimit("path", 4 << 10, shape=absolute_path)
CGROUP = FieldLimit("cgroup path", 4 << 10, shape=cgroup_path)
REF = FieldLimit("path reference", 4 << 10, shape=relative_ref)
KEY = NAME  # every map key (labels, annotations, sysctls, unified, ...)

# (message, field) -> its limit where it is not TEXT. Messages are NRI's (api_pb2) and the
# envelope's Structs (``WebhookRequest``, ``RuntimeRef``, ``Update``).
FIELDS: dict[tuple[str, str], FieldLimit] = {
    ("WebhookRequest", "uid"): NAME,
    ("RuntimeRef", "name"): NAME,
    ("RuntimeRef", "version"): NAME,
    ("RuntimeRef", "nri_version"): NAME,
    ("RuntimeRef", "capabilities"): NAME,
    ("Update", "container_id"): NAME,
    ("PodSandbox", "id"): NAME,
    ("PodSandbox", "name"): NAME,
    ("PodSandbox", "uid"): NAME,
    ("PodSandbox", "namespace"): NAME,
    ("PodSandbox", "runtime_handler"): NAME,
    ("PodSandbox", "ips"): NAME,
    ("LinuxPodSandbox", "cgroup_parent"): CGROUP,
    ("LinuxPodSandbox", "cgroups_path"): CGROUP,
    ("Container", "id"): NAME,
    ("Container", "pod_sandbox_id"): NAME,
    ("Container", "name"): NAME,
    ("LinuxContainer", "cgroups_path"): CGROUP,
    ("LinuxContainerAdjustment", "cgroups_path"): CGROUP,
    ("Mount", "destination"): PATH,
    ("Mount", "source"): REF,
    ("Mount", "type"): NAME,
    ("Mount", "options"): NAME,
    ("Hook", "path"): PATH,
    ("LinuxDevice", "path"): PATH,
    ("LinuxDevice", "type"): NAME,
    ("LinuxDeviceCgroup", "type"): NAME,
    ("LinuxDeviceCgroup", "access"): NAME,
    ("LinuxNamespace", "type"): NAME,
    ("LinuxNamespace", "path"): PATH,
    ("LinuxSeccomp", "listener_path"): PATH,
    ("SecurityProfile", "localhost_ref"): REF,
    ("CDIDevice", "name"): NAME,
    ("LinuxNetDevice", "name"): NAME,
    ("HugepageLimit", "page_size"): NAME,
    ("POSIXRlimit", "type"): NAME,
    ("LinuxRdt", "clos_id"): NAME,
    ("LinuxResources", "rdt_class"): NAME,
    ("LinuxResources", "blockio_class"): NAME,
    ("PluginInstance", "name"): NAME,
    ("PluginInstance", "index"): NAME,
}


def limit_of(message: str, field: str) -> FieldLimit:
    """The limit of ``message.field``'s strings (list items and map values alike)."""
    return FIELDS.get((message, field), TEXT)


def limit_problem(limit: FieldLimit, value: str) -> str | None:
    """How ``value`` breaks ``limit`` (``contains a NUL byte``, ...), or None. The length bound
    is the decoder's and is checked here too."""
    bad = (_CONTROL_IN_TEXT if limit.newlines else _CONTROL).search(value)
    if bad is None and len(value) <= limit.max_length:
        return limit.shape(value) if limit.shape is not None else None
    if bad is not None:
        char = bad.group()
        return "contains a NUL byte" if char == "\0" else (
            f"contains a control character (U+{ord(char):04X})")
    if len(value) > limit.max_length:
        return f"is longer than {limit.max_length} characters"
    return limit.shape(value) if limit.shape is not None else None
