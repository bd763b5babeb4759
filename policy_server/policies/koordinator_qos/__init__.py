"""koordinator's koordlet QoS runtime hooks as a policy (docs/koordinator.md).

A built-in like any other (``--policy koordinator-qos[=RULES]``, ``--rules RULES`` its alias):
``build(settings)`` (``wiring``) returns the ``koordinator-qos`` policy with its rules file,
background watcher, state description, reconcile hook and node needs, all through the SDK.
``build_policy(rules_provider)`` is the bare policy; ``Rules`` and ``rules_from_yaml`` describe
its configuration. Imports only the SDK from the server (an import-linter contract).
"""

from policy_server.policies.koordinator_qos.bundle import (
    HOOKS,
    POLICY_NAME,
    KoordContext,
    build_policy,
)
from policy_server.policies.koordinator_qos.rules import Rules, rules_from_doc, rules_from_yaml
from policy_server.policies.koordinator_qos.wiring import (
    DESCRIPTION,
    READS_OWN_CONFIG,
    KoordinatorQoS,
    build,
)

__all__ = [
    "DESCRIPTION",
    "HOOKS",
    "POLICY_NAME",
    "READS_OWN_CONFIG",
    "KoordContext",
    "KoordinatorQoS",
    "Rules",
    "build",
    "build_policy",
    "rules_from_doc",
    "rules_from_yaml",
]
