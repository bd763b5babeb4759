"""The values the change writes: NRI on, external plugins accepted, paths, timeouts, and the
default validator's fail-closed options when asked.

Owns: `NriSettings` and `FailClosed` (checked at construction: Go durations, absolute paths,
plugin names), the entries a target gets (`entries`: table, key, value and the comment written
above a key the change adds), and which adjustments the fail-closed validator rejects.

Must not: read or edit files (toml_change.py does) or know a runtime's key names
(runtime_tables.py does).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bridge.contract.nri_version import format_version
from bridge.runtime_config.runtime_tables import ConfigTarget, RuntimeConfigError
from bridge.transport.connect import DEFAULT_SOCKET_PATH as DEFAULT_SOCKET_PATH

# The runtimes' own defaults (NRI pkg/adaptation: DefaultPluginPath, DefaultPluginConfigPath,
# DefaultPluginRegistrationTimeout, DefaultPluginRequestTimeout), spelled out so a changed
# default cannot surprise a node.
DEFAULT_PLUGIN_PATH = "/opt/nri/plugins"
DEFAULT_PLUGIN_CONFIG_PATH = "/etc/nri/conf.d"
DEFAULT_REGISTRATION_TIMEOUT = "5s"
DEFAULT_REQUEST_TIMEOUT = "2s"
# The bridge's plugin name as the DaemonSet and the systemd unit register it.
DEFAULT_REQUIRED_PLUGIN = "webhook-bridge"
# The key the bridge's own pod carries (deploy/kubernetes/base/daemonset.yaml).
DEFAULT_TOLERATE_ANNOTATION = "tolerate-missing-nri-plugins.noderesource.dev"

# Adjustments the bridge's shipped policies never make, so a fail-closed node rejects them
# from any plugin; `--allow-adjustment` keeps one for a policy that makes it (the built-in
# oci_hooks and hook_injector policies inject hooks).
REJECTABLE: dict[str, tuple[str, ...]] = {
    "oci-hooks": ("reject_oci_hooks",),
    "namespaces": ("reject_namespaces",),
    "seccomp": ("reject_runtime_default_seccomp", "reject_unconfined_seccomp",
                "reject_custom_seccomp"),
}
_WHAT_REJECTED = {
    "reject_oci_hooks": "OCI hook injection",
    "reject_namespaces": "namespace changes",
    "reject_runtime_default_seccomp": "a new seccomp policy for a runtime-default profile",
    "reject_unconfined_seccomp": "a new seccomp policy for an unconfined one (or none)",
    "reject_custom_seccomp": "a new seccomp policy for a custom (Localhost) one",
}

# Go's time.ParseDuration grammar (what both runtimes decode), without a sign.
_GO_DURATION = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|µs|ms|s|m|h)")
_UNIT_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PLUGIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_ANNOTATION_KEY = re.compile(
    r"(?:[a-z0-9](?:[-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?")


def duration_s(flag: str, text: str) -> float:
    """Seconds in a Go duration string ("2s", "1m30s", "500ms"); RuntimeConfigError if not one
    or not positive."""
    if not text or _GO_DURATION.sub("", text) != "":
        raise RuntimeConfigError(f"{flag}: {text!r} is not a Go duration such as 2s or 500ms")
    seconds = 0.0
    for part in _GO_DURATION.findall(text):
        unit = part.lstrip("0123456789.")
        seconds += float(part[: len(part) - len(unit)]) * _UNIT_S[unit]
    if seconds <= 0:
        raise RuntimeConfigError(f"{flag}: {text!r} must be longer than zero")
    return seconds


def _absolute(flag: str, path: str) -> None:
    if not path.startswith("/"):
        raise RuntimeConfigError(f"{flag}: {path!r} is not an absolute path")


@dataclass(frozen=True, slots=True)
class FailClosed:
    """The default validator: required plugins, the opt-out annotation, rejected adjustments."""

    required_plugins: tuple[str, ...] = (DEFAULT_REQUIRED_PLUGIN,)
    tolerate_annotation: str = DEFAULT_TOLERATE_ANNOTATION
    allowed: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if not self.required_plugins:
            raise RuntimeConfigError("--required-plugin: at least one plugin must be required")
        for name in self.required_plugins:
            if not _PLUGIN_NAME.fullmatch(name):
                raise RuntimeConfigError(f"--required-plugin: {name!r} is not a plugin name "
                                         "(letters, digits, '-', '_', '.')")
        if self.tolerate_annotation and not _ANNOTATION_KEY.fullmatch(self.tolerate_annotation):
            raise RuntimeConfigError(f"--tolerate-annotation: {self.tolerate_annotation!r} is "
                                     "not an annotation key")
        unknown = sorted(self.allowed - set(REJECTABLE))
        if unknown:
            raise RuntimeConfigError(f"--allow-adjustment: {', '.join(unknown)} is not one of "
                                     f"{', '.join(REJECTABLE)}")

    def rejected(self) -> tuple[str, ...]:
        return tuple(name for kind, names in REJECTABLE.items() if kind not in self.allowed
                     for name in names)


@dataclass(frozen=True, slots=True)
class NriSettings:
    """What the change sets; the defaults are the runtimes' defaults and the bridge's socket."""

    socket_path: str = DEFAULT_SOCKET_PATH
    plugin_path: str = DEFAULT_PLUGIN_PATH
    plugin_config_path: str = DEFAULT_PLUGIN_CONFIG_PATH
    registration_timeout: str = DEFAULT_REGISTRATION_TIMEOUT
    request_timeout: str = DEFAULT_REQUEST_TIMEOUT
    fail_closed: FailClosed | None = None

    def __post_init__(self) -> None:
        _absolute("--socket-path", self.socket_path)
        _absolute("--plugin-path", self.plugin_path)
        _absolute("--plugin-config-path", self.plugin_config_path)
        duration_s("--registration-timeout", self.registration_timeout)
        duration_s("--request-timeout", self.request_timeout)


Value = bool | str | list[str]


@dataclass(frozen=True, slots=True)
class Entry:
    """One key the change sets: its table, name, value and the comment above it when added."""

    table: tuple[str, ...]
    key: str
    value: Value
    comment: str


def _nri_entries(target: ConfigTarget, s: NriSettings) -> list[Entry]:
    why = {
        "enabled": "NRI on (containerd 1.7 and older CRI-O releases ship it off).",
        "accept_connections": "Accept external plugins on the socket: the bridge connects as one.",
        "socket_path": "Where external plugins connect (the bridge's --nri-socket).",
        "plugin_path": "Plugins the runtime launches itself (not used by the DaemonSet: "
                       "docs/deployment.md#external-not-launched).",
        "plugin_config_path": "Their config files, sent to the plugin in Configure.",
        "registration_timeout": "Time a plugin has to send RegisterPlugin after connecting.",
        "request_timeout": "Time a plugin has to answer one event (one budget for all parts of "
                           "a Synchronize); the bridge reads it from Configure and answers "
                           "before it. A plugin that misses it is disconnected.",
    }
    values: dict[str, bool | str] = {
        "enabled": True, "accept_connections": True, "socket_path": s.socket_path,
        "plugin_path": s.plugin_path, "plugin_config_path": s.plugin_config_path,
        "registration_timeout": s.registration_timeout, "request_timeout": s.request_timeout,
    }
    out = []
    for name, value in values.items():
        key, inverted = target.keys[name]
        out.append(Entry(target.table, key, (not value) if inverted else value, why[name]))
    return out


def _validator_entries(target: ConfigTarget, fc: FailClosed) -> list[Entry]:
    if not target.has_validator:
        raise RuntimeConfigError(
            f"--fail-closed: {target.name()} vendors NRI {format_version(target.nri)}, which "
            "has no default validator (it came with NRI v0.10: containerd 2.2, CRI-O 1.34)")
    rejected = set(fc.rejected())
    why = {
        "enable": "Fail closed: the built-in default validator (plugin 00-default-validator).",
        "required_plugins": "Containers are not created while these plugins are not connected "
                            "(bare name or NN-name).",
        "tolerate_annotation": "A pod annotated <key>: \"true\" (or <key>/pod, "
                               "<key>/container.<name>) starts without them: the bridge's own "
                               "pod, CNI, kube-proxy.",
    }
    for kind, names in REJECTABLE.items():
        for name in names:
            verdict = "rejected" if name in rejected else f"allowed (--allow-adjustment {kind})"
            why[name] = f"From any plugin, {_WHAT_REJECTED[name]}: {verdict}."
    values: list[tuple[str, Value]] = [("enable", True)]
    values += [(name, name in rejected) for names in REJECTABLE.values() for name in names]
    values += [("required_plugins", list(fc.required_plugins))]
    if fc.tolerate_annotation:
        values.append(("tolerate_annotation", fc.tolerate_annotation))
    return [Entry(target.validator_table, target.validator_keys[name][0], value, why[name])
            for name, value in values]


def entries(target: ConfigTarget, settings: NriSettings) -> tuple[Entry, ...]:
    """Every key the change sets for `target`, in the order a new table lists them."""
    out = _nri_entries(target, settings)
    if settings.fail_closed is not None:
        out += _validator_entries(target, settings.fail_closed)
    return tuple(out)
