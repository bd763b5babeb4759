"""koordinator's koordlet QoS runtime hooks as a policy (docs/koordinator.md).

``build_policy(rules_provider)`` returns the ``koordinator-qos`` policy; ``Rules`` and
``rules_from_yaml`` describe its configuration. Pure decision logic: the rules file, its reload
and pod-cgroup writes are the server's business.
"""

from policy_server.policies.koordinator_qos.bundle import (
    HOOKS,
    POLICY_NAME,
    KoordContext,
    build_policy,
)
from policy_server.policies.koordinator_qos.rules import Rules, rules_from_doc, rules_from_yaml

__all__ = [
    "HOOKS",
    "POLICY_NAME",
    "KoordContext",
    "Rules",
    "build_policy",
    "rules_from_doc",
    "rules_from_yaml",
]
