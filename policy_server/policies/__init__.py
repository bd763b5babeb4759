"""The built-in policies, each enabled by name: ``nri-policy-server --policy NAME[=CONFIG]``.

Owns the catalogue (policy name -> the module that builds it), building a policy from its
configuration file, and which built-ins a server serves by default: ``DEFAULT_POLICY``
(koordinator-qos) unless ``--no-koordinator``, configured by ``--rules`` (an alias of
``--policy koordinator-qos=FILE``). Each policy lives in its own module (or package) here and
exports two names:

- ``DESCRIPTION``: one line for ``--list-policies``;
- ``build(settings: PolicySettings) -> Policy``: the policy, configured from its YAML file
  (``{}`` without one) validated by the policy's own pydantic model
  (``settings.parse(Model)``, a ``PolicyConfig``); bad configuration raises
  ``PolicyConfigError`` naming the file and the key path (``settings.error(key, message)`` for
  checks across keys), which the CLI prints before exiting with status 2.

A module that reads its file itself (koordinator-qos watches it) sets ``READS_OWN_CONFIG =
True`` and gets the path unread (``settings.path``). ``settings.node`` holds what the server
found out about the host at start-up.

Adding a policy: the files to touch are listed once, in docs/architecture.md ("Where to add
things", "A policy"; tests/test_where_to_add.py checks each lists every ``CATALOGUE`` name).
Modules are imported only when their policy is enabled.
Must not import web frameworks; the policies' handlers stay pure (host lookups such as reading a
hooks directory happen in the policy's context provider).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol, cast

from policy_server.policies.policy_config import PolicyConfigError, PolicySettings, load_settings
from policy_server.sdk import UNKNOWN_NODE, NodeFacts, Policy, PolicyLoadError

__all__ = [
    "CATALOGUE",
    "DEFAULT_POLICY",
    "PolicyConfigError",
    "PolicySettings",
    "build_builtin",
    "describe_builtins",
    "enabled_builtins",
    "parse_policy_arg",
]

# name -> module. One line per policy; keep it sorted.
CATALOGUE: dict[str, str] = {
    "cel": "policy_server.policies.cel",
    "cpu-pools": "policy_server.policies.cpu_pools",
    "device-injector": "policy_server.policies.device_injector",
    "hook-injector": "policy_server.policies.hook_injector",
    "koordinator-qos": "policy_server.policies.koordinator_qos",
    "ulimit-adjuster": "policy_server.policies.ulimit_adjuster",
}

# Served unless --no-koordinator; --rules FILE is its configuration (docs/koordinator.md).
DEFAULT_POLICY = "koordinator-qos"


class _PolicyModule(Protocol):
    DESCRIPTION: str

    def build(self, settings: PolicySettings) -> Policy[Any]: ...


def _module(name: str) -> _PolicyModule:
    if name not in CATALOGUE:
        known = ", ".join(sorted(CATALOGUE))
        raise PolicyLoadError(f"no built-in policy named {name!r} (known: {known})")
    return cast(_PolicyModule, importlib.import_module(CATALOGUE[name]))


def build_builtin(
    name: str,
    config: Path | Mapping[str, Any] | None = None,
    node: NodeFacts = UNKNOWN_NODE,
) -> Policy[Any]:
    """The built-in policy ``name`` configured from a YAML file, a mapping, or its defaults;
    ``node``: what the server found out about the host."""
    module = _module(name)
    if getattr(module, "READS_OWN_CONFIG", False):
        if isinstance(config, Mapping):
            raise PolicyLoadError(f"built-in policy {name!r} reads its configuration file itself")
        source = str(config) if config is not None else "defaults"
        settings = PolicySettings(name, source=source, path=config, node=node)
    elif isinstance(config, Mapping):
        doc = MappingProxyType(dict(config))
        settings = PolicySettings(name, doc, "inline configuration", node=node)
    else:
        settings = load_settings(name, config, node)
    policy = module.build(settings)
    if policy.name != name:  # the URL path must be the name the operator enabled
        raise PolicyLoadError(f"built-in policy {name!r} built a policy named {policy.name!r}")
    return policy


def describe_builtins() -> dict[str, str]:
    """name -> one-line description, for ``--list-policies``."""
    return {name: _module(name).DESCRIPTION for name in sorted(CATALOGUE)}


def parse_policy_arg(value: str) -> tuple[str, Path | None]:
    """``NAME`` or ``NAME=CONFIG_FILE`` (the ``--policy`` flag's argument)."""
    name, sep, config = value.partition("=")
    if not name or (sep and not config):
        raise PolicyLoadError(f"--policy {value!r}: expected NAME or NAME=CONFIG_FILE")
    _module(name)  # unknown names fail here, before anything starts
    return name, Path(config) if sep else None


def enabled_builtins(
    requested: Sequence[tuple[str, Path | None]],
    rules_path: Path | None = None,
    default: bool = True,
) -> tuple[tuple[str, Path | None], ...]:
    """The built-ins to serve, in order: ``DEFAULT_POLICY`` first (configured by ``rules_path``,
    the ``--rules`` alias) unless ``default`` is off (``--no-koordinator``) and no ``--rules``
    asks for it, or ``--policy`` names it; then ``requested`` (``--policy``) as given. Raises
    ``PolicyLoadError`` for a policy named twice or a configuration given twice."""
    names = [name for name, _ in requested]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise PolicyLoadError(f"--policy {twice[0]} given twice")
    out = list(requested)
    if DEFAULT_POLICY in names:
        i = names.index(DEFAULT_POLICY)
        if rules_path is not None:
            if out[i][1] is not None:
                raise PolicyLoadError(
                    f"--rules is --policy {DEFAULT_POLICY}'s configuration: give it once"
                )
            out[i] = (DEFAULT_POLICY, rules_path)
    elif default or rules_path is not None:  # --rules FILE asks for it as --policy would
        out.insert(0, (DEFAULT_POLICY, rules_path))
    return tuple(out)
