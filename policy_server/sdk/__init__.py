"""The policy SDK: everything a policy author uses, and the only door into the policy server.

Owns the values a handler receives (``Event``, ``Pod``, ``Container``, ``Resources``, the
read-only ``NodeView`` with the ``NodeFacts`` about the host), the values it returns
(``Decision`` and its parts, the OCI kinds an adjustment can add, node effects), ``Policy``
with its decorators and failure policy, the errors a handler may raise, the cpu-list grammar
and the merge of several handlers' decisions.

Must not: import the engine, the server, host I/O or the bridge link; do I/O. The built-in
policies (``policy_server.policies``) and koordinator-qos (``policy_server.koordinator``) import
only this face (an import-linter contract): what they need, every author gets.
"""

from bridge.contract.catalogue import EventName
from policy_server.exceptions import PolicyError, PolicyLoadError, RulesError
from policy_server.sdk.cpu_list import (
    canonical_cpu_list,
    check_cpu_list,
    format_cpu_list,
    parse_cpu_list,
)
from policy_server.sdk.decision import (
    NO_RESOURCES,
    Adjustment,
    CgroupWrite,
    ContainerUpdate,
    Decision,
    Effect,
    Eviction,
    HostDirectory,
    ResctrlGroup,
    ResctrlGroupRemoval,
    ResourcePatch,
    merge,
)
from policy_server.sdk.model import CPU, Container, Event, Memory, Mount, Pod, Resources, no_strings
from policy_server.sdk.node_facts import UNKNOWN_NODE, NodeFacts
from policy_server.sdk.node_view import NodeView
from policy_server.sdk.oci import Device, Hook, HookStage, Rlimit, StagedHook
from policy_server.sdk.registry import FailurePolicy, Policy, PolicyState

__all__ = [
    "CPU",
    "NO_RESOURCES",
    "UNKNOWN_NODE",
    "Adjustment",
    "CgroupWrite",
    "Container",
    "ContainerUpdate",
    "Decision",
    "Device",
    "Effect",
    "Event",
    "EventName",
    "Eviction",
    "FailurePolicy",
    "Hook",
    "HookStage",
    "HostDirectory",
    "Memory",
    "Mount",
    "NodeFacts",
    "NodeView",
    "Pod",
    "Policy",
    "PolicyError",
    "PolicyLoadError",
    "PolicyState",
    "ResctrlGroup",
    "ResctrlGroupRemoval",
    "ResourcePatch",
    "Resources",
    "Rlimit",
    "RulesError",
    "StagedHook",
    "canonical_cpu_list",
    "check_cpu_list",
    "format_cpu_list",
    "merge",
    "no_strings",
    "parse_cpu_list",
]
