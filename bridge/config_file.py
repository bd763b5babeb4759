"""Bridge configuration: the YAML file given with --config.

Loading never raises anything but ConfigError, whose key names the offending
setting (`webhooks[0].timeout: ...`); the CLI turns it into exit code 2.
The webhook section is validated by bridge.webhooks.specs, the control
section by bridge.control.settings, the updates section by bridge.nri.update_routes (its
`allow` list with bridge.webhooks.kinds), the node section by bridge.webhooks.node_hugepages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bridge.control.settings import ControlSettings, parse_control
from bridge.errors import ConfigError
from bridge.nri.static import StaticSettings
from bridge.nri.update_routes import UpdateSettings
from bridge.webhooks.kinds import CONTROL_UPDATE_KINDS, check_allow
from bridge.webhooks.node_hugepages import NodeSettings
from bridge.webhooks.specs import WebhookSpec, parse_webhooks

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


def parse(document: Any, source: str = "config") -> BridgeConfig:
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
                        webhooks=parse_webhooks(document.get("webhooks")),
                        control=parse_control(document.get("control")),
                        updates=updates, node=NodeSettings.parse(document.get("node")),
                        control_allow=control_allow)


def load_text(text: str, source: str) -> BridgeConfig:
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise ConfigError(source, f"invalid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    return parse(document, source)


def load_file(path: str) -> BridgeConfig:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(path, f"cannot read: {exc.strerror}") from None
    return load_text(text, path)
