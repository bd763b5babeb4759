"""The built-in policies, each enabled by name: ``nri-policy-server --policy NAME[=CONFIG]``.

Owns the catalogue (policy name -> the module that builds it) and building a policy from its
configuration file. Each policy lives in its own module here and exports two names:

- ``DESCRIPTION``: one line for ``--list-policies``;
- ``build(settings: PolicySettings) -> Policy``: the policy, configured from its YAML file
  (``{}`` without one) validated by the policy's own pydantic model
  (``settings.parse(Model)``, a ``PolicyConfig``); bad configuration raises
  ``PolicyConfigError`` naming the file and the key path (``settings.error(key, message)`` for
  checks across keys), which the CLI prints before exiting with status 2.

Adding a policy: write ``policy_server/policies/<module>.py``, add one line to ``CATALOGUE``,
and a page ``docs/policies/<name>.md``. Modules are imported only when their policy is enabled.
Must not import web frameworks; the policies' handlers stay pure (host lookups such as reading a
hooks directory happen in the policy's context provider).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol, cast

from policy_server.policies.policy_config import PolicyConfigError, PolicySettings, load_settings
from policy_server.sdk import Policy, PolicyLoadError

__all__ = [
    "CATALOGUE",
    "PolicyConfigError",
    "PolicySettings",
    "build_builtin",
    "describe_builtins",
    "parse_policy_arg",
]

# name -> module. One line per policy; keep it sorted.
CATALOGUE: dict[str, str] = {
    "cpu-pools": "policy_server.policies.cpu_pools",
    "device-injector": "policy_server.policies.device_injector",
    "hook-injector": "policy_server.policies.hook_injector",
    "ulimit-adjuster": "policy_server.policies.ulimit_adjuster",
}


class _PolicyModule(Protocol):
    DESCRIPTION: str

    def build(self, settings: PolicySettings) -> Policy[Any]: ...


def _module(name: str) -> _PolicyModule:
    if name not in CATALOGUE:
        known = ", ".join(sorted(CATALOGUE))
        raise PolicyLoadError(f"no built-in policy named {name!r} (known: {known})")
    return cast(_PolicyModule, importlib.import_module(CATALOGUE[name]))


def build_builtin(name: str, config: Path | Mapping[str, Any] | None = None) -> Policy[Any]:
    """The built-in policy ``name`` configured from a YAML file, a mapping, or its defaults."""
    if isinstance(config, Mapping):
        settings = PolicySettings(name, MappingProxyType(dict(config)), "inline configuration")
    else:
        settings = load_settings(name, config)
    policy = _module(name).build(settings)
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
