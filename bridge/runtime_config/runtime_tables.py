"""Where each runtime reads its NRI settings: table paths, key names, config format versions.

Owns: the facts, read from the runtimes' sources, that the change needs:
- containerd's NRI plugin is `io.containerd.nri.v1.nri` (containerd 1.7 `pkg/nri/config.go`,
  2.x `internal/nri/config.go`), in config format `version = 2` on 1.7 (NRI ships disabled,
  `disable = true`), 3 on 2.0-2.2 and 4 from 2.3 (`version/version.go` ConfigVersion; the NRI
  table did not change between 3 and 4, it has no ConfigMigration); containerd >= 2.2 adds the
  `default_validator` sub-table (NRI >= v0.10, `plugins/default-validator`);
- CRI-O reads `[crio.nri]` with keys of its own (`enable_nri`, `nri_listen`, ...) and, from 1.34
  (NRI v0.10), `[crio.nri.default_validator]` whose keys carry an `nri_`/`nri_validator_` prefix
  (CRI-O `internal/config/nri/nri.go`).
Which NRI version a runtime release vendors is bridge.contract.nri_version's table.

Must not: read or write files, or decide values (nri_settings.py does).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from bridge.contract.nri_version import Version, nri_version_of, parse_version


class RuntimeConfigError(Exception):
    """A request the change cannot serve: an unknown runtime, an option the runtime lacks, a
    file it cannot read. The message names the flag, the table or the file position."""


CONTAINERD = "containerd"
CRIO = "cri-o"
RUNTIMES = (CONTAINERD, CRIO)

NRI_PLUGIN = "io.containerd.nri.v1.nri"
# The first release with the NRI plugin this command configures.
_FIRST = {CONTAINERD: (1, 7, 0), CRIO: (1, 26, 0)}
# The default validator (plugins/default-validator) came with NRI v0.10.0.
VALIDATOR_NRI: Version = (0, 10, 0)

# A key: its name, and whether the file's value is the negation of the setting
# (containerd's `disable` for "enabled", both runtimes' `disable_connections` for "accept").
Key = tuple[str, bool]


def _keys(**names: Key) -> Mapping[str, Key]:
    return MappingProxyType(names)


_CONTAINERD_KEYS = _keys(
    enabled=("disable", True),
    accept_connections=("disable_connections", True),
    socket_path=("socket_path", False),
    plugin_path=("plugin_path", False),
    plugin_config_path=("plugin_config_path", False),
    registration_timeout=("plugin_registration_timeout", False),
    request_timeout=("plugin_request_timeout", False),
)
_CRIO_KEYS = _keys(
    enabled=("enable_nri", False),
    accept_connections=("nri_disable_connections", True),
    socket_path=("nri_listen", False),
    plugin_path=("nri_plugin_dir", False),
    plugin_config_path=("nri_plugin_config_dir", False),
    registration_timeout=("nri_plugin_registration_timeout", False),
    request_timeout=("nri_plugin_request_timeout", False),
)
# The default validator's options, by the names nri_settings uses.
_VALIDATOR_NAMES = {
    "enable": "enable",
    "reject_oci_hooks": "reject_oci_hook_adjustment",
    "reject_runtime_default_seccomp": "reject_runtime_default_seccomp_adjustment",
    "reject_unconfined_seccomp": "reject_unconfined_seccomp_adjustment",
    "reject_custom_seccomp": "reject_custom_seccomp_adjustment",
    "reject_namespaces": "reject_namespace_adjustment",
    "required_plugins": "required_plugins",
    "tolerate_annotation": "tolerate_missing_plugins_annotation",
}
_CONTAINERD_VALIDATOR = _keys(**{n: (k, False) for n, k in _VALIDATOR_NAMES.items()})
_CRIO_VALIDATOR = _keys(**{
    n: ("nri_enable_default_validator" if n == "enable" else f"nri_validator_{k}", False)
    for n, k in _VALIDATOR_NAMES.items()})


@dataclass(frozen=True, slots=True)
class ConfigTarget:
    """One runtime release and the config file format it is written in."""

    runtime: str
    version: Version
    nri: Version | None  # the NRI module it vendors (None: older than the version table)
    config_version: int | None  # containerd's `version = N`; CRI-O files have none
    table: tuple[str, ...]
    keys: Mapping[str, Key]
    validator_keys: Mapping[str, Key]

    @property
    def validator_table(self) -> tuple[str, ...]:
        return (*self.table, "default_validator")

    @property
    def has_validator(self) -> bool:
        return self.nri is not None and self.nri >= VALIDATOR_NRI

    @property
    def literal_keys(self) -> bool:
        """containerd's own output quotes plugin ids with '...' from format 3 on."""
        return self.config_version is not None and self.config_version >= 3

    def name(self) -> str:
        label = "containerd" if self.runtime == CONTAINERD else "CRI-O"
        return f"{label} {self.version[0]}.{self.version[1]}"

    def describe(self) -> str:
        if self.config_version is None:
            return self.name()
        return f"{self.name()} (config version {self.config_version})"


def max_config_version(version: Version) -> int:
    """The newest containerd config format a release reads (and writes by default)."""
    if version < (2, 0, 0):
        return 2
    return 3 if version < (2, 3, 0) else 4


def target(runtime: str, runtime_version: str, config_version: int | None = None,
           source: str = "<new>") -> ConfigTarget:
    """The target for `--runtime`/`--runtime-version`; `config_version` is the `version` of
    the existing file `source` (containerd), else the release's own format."""
    if runtime not in RUNTIMES:
        raise RuntimeConfigError(f"--runtime: {runtime!r} is not one of {', '.join(RUNTIMES)}")
    version = parse_version(runtime_version)
    if version is None:
        raise RuntimeConfigError(f"--runtime-version: {runtime_version!r} is not a version "
                                 "such as 1.7 or 2.1.9")
    if version < _FIRST[runtime]:
        first = "{}.{}".format(*_FIRST[runtime][:2])
        raise RuntimeConfigError(f"--runtime-version: {runtime} {runtime_version} has no NRI "
                                 f"plugin to configure (first: {first})")
    nri = nri_version_of(runtime, runtime_version, "")
    if runtime == CRIO:
        return ConfigTarget(CRIO, version, nri, None, ("crio", "nri"), _CRIO_KEYS, _CRIO_VALIDATOR)
    newest = max_config_version(version)
    chosen = newest if config_version is None else config_version
    if not 2 <= chosen <= newest:
        reads = "format 2" if newest == 2 else f"formats 2 to {newest}"
        raise RuntimeConfigError(
            f"{source}: version: the file is in containerd config format {chosen}; containerd "
            f"{runtime_version} reads {reads} (this command writes no format 1: run "
            "`containerd config migrate`)")
    return ConfigTarget(CONTAINERD, version, nri, chosen, ("plugins", NRI_PLUGIN), _CONTAINERD_KEYS,
                  _CONTAINERD_VALIDATOR)


def dotted(path: tuple[str, ...], literal: bool) -> str:
    """A table path as a TOML header writes it: `plugins."io.containerd.nri.v1.nri"`."""
    quote = "'" if literal else '"'
    return ".".join(p if p.replace("_", "").replace("-", "").isalnum() else f"{quote}{p}{quote}"
                    for p in path)
