"""Bridge configuration: the YAML file given with --config.

Loading never raises anything but ConfigError, whose key names the offending
setting (`webhooks[0].timeout: ...`); the CLI turns it into exit code 2.
The webhook section is validated by bridge.webhooks.specs, the control
section by bridge.control.settings, the updates section by bridge.nri.update_routes (its
`allow` list with bridge.webhooks.kinds), the node section by bridge.webhooks.node_hugepages.

The file itself and every file and socket directory it names are held to the node's file rule
(bridge.file_trust, docs/security.md#files): `file_problems` lists each one that fails,
naming its key and path; `validate-config` prints them all and `run` refuses to start on any.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bridge import file_trust, strict_yaml
from bridge.control.settings import ControlSettings, parse_control
from bridge.errors import ConfigError
from bridge.nri.static import StaticSettings
from bridge.nri.update_routes import UpdateSettings
from bridge.webhooks.kinds import CONTROL_UPDATE_KINDS, check_allow
from bridge.webhooks.node_hugepages import NodeSettings
from bridge.webhooks.specs import WebhookSpec, parse_webhooks, webhook_file_problems

TOP_LEVEL_KEYS = frozenset({"static", "webhooks", "control", "updates", "node"})


@dataclass(frozen=True, slots=True)
class BridgeConfig:
    static: StaticSettings
    webhooks: tuple[WebhookSpec, ...] = ()
    control: ControlSettings = field(default_factory=ControlSettings)
    updates: UpdateSettings = field(default_factory=UpdateSettings)
    node: NodeSettings = field(default_factory=NodeSettings)
    # What POST /v1/updates may change (the kinds and named items, bridge.webhooks.kinds).
    control_allow: frozenset[str] = CONTROL_UPDATE_KINDS


def parse(document: Any, source: str = "config", *, check_files: bool = True) -> BridgeConfig:
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise ConfigError(source, "the top level must be a mapping")
    for key in document:
        if key not in TOP_LEVEL_KEYS:
            raise ConfigError(str(key), f"unknown key (known: {', '.join(sorted(TOP_LEVEL_KEYS))})")
    updates = UpdateSettings.parse(document.get("updates"))
    control_allow = CONTROL_UPDATE_KINDS
    if updates.allow is not None:
        control_allow = check_allow(updates.allow, "updates.allow", CONTROL_UPDATE_KINDS)
    return BridgeConfig(static=StaticSettings.parse(document.get("static")),
                        webhooks=parse_webhooks(document.get("webhooks"),
                                                check_files=check_files),
                        control=parse_control(document.get("control")),
                        updates=updates, node=NodeSettings.parse(document.get("node")),
                        control_allow=control_allow)


def load_text(text: str, source: str, *, check_files: bool = True) -> BridgeConfig:
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:  # the line and the reason (bridge.strict_yaml)
        raise ConfigError(source, f"invalid YAML: {strict_yaml.one_line(exc)}") from None
    return parse(document, source, check_files=check_files)


def load_file(path: str, *, check_files: bool = True) -> BridgeConfig:
    """The config in `path`. With `check_files`, the file must pass the file rule and so must
    the files it names (the first that does not is raised); without, it is read as it is and
    `file_problems` says what is wrong."""
    try:
        if check_files:
            text = file_trust.read_trusted(path).decode("utf-8")
        else:
            text = Path(path).read_text(encoding="utf-8")
    except file_trust.UntrustedPath as exc:
        raise ConfigError(path, exc.problem if exc.path == path else str(exc)) from None
    except OSError as exc:
        raise ConfigError(path, f"cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(path, f"not UTF-8: {exc.reason}") from None
    return load_text(text, path, check_files=check_files)


def file_problems(config: BridgeConfig, path: str | None, *,
                  take_directories: bool = False) -> list[ConfigError]:
    """Every file and socket path of `config` (and the file `path` it came from) that fails
    the file rule, each as ConfigError(key, "PATH: problem").

    Socket paths: the directory of each `unix://` policy (its owners may include the
    webhook's `peer_uids`) and the control socket; whatever is at the path already must be
    theirs. `take_directories` (run, not validate-config): a socket directory of ours that
    others may write (a Kubernetes emptyDir is 0777) loses that permission first."""
    problems: list[ConfigError] = []
    if path is not None:
        _check(problems, "--config", path, None)
    for i, spec in enumerate(config.webhooks):
        problems += webhook_file_problems(spec, f"webhooks[{i}]")
        if spec.endpoint.socket_path is not None:
            _check(problems, f"webhooks[{i}].url", spec.endpoint.socket_path, spec.peer_owners,
                   take=take_directories)
    if config.control.socket_path is not None:
        _check(problems, "control.socket", config.control.socket_path,
               file_trust.default_owners(), take=take_directories)
    return problems


def _check(problems: list[ConfigError], key: str, path: str, socket_owners: frozenset[int] | None,
           *, take: bool = False) -> None:
    """A file (`socket_owners` None) or a socket path checked; a problem appended."""
    try:
        if socket_owners is None:
            file_trust.check_file(path)
        else:
            file_trust.check_socket_path(path, socket_owners, take_directory=take)
    except file_trust.UntrustedPath as exc:
        problems.append(ConfigError(key, str(exc) if exc.path == path else f"{path}: {exc}"))
