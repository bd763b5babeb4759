"""The policy SDK: everything a policy author uses, and the only door into the policy server.

Owns the values a handler receives (``Event``, ``Pod``, ``Container``, ``Resources``, the
read-only ``NodeView`` with the ``NodeFacts`` about the host), the values it returns
(``Decision`` and its parts, the OCI kinds an adjustment can add, node effects), what a
validator is told besides the adjustment (``Owners``, ``Plugin``), ``Policy``
with its decorators, failure policy and the part of a request its handlers read (``Payload``),
the errors a handler may raise, the cpu-list and systemd slice grammars, a YAML syntax error
said as its line and reason (yaml_problem, the bridge's: policy configurations and rules read
like suites and manifests) and the merge of several handlers' decisions.

Also the extension points beyond handlers (``extension``: background task, state description,
reconcile hook, node needs; ``node_plan``: what a reconcile hook keeps on the node), and the
contract as data: an adjustment <-> its JSON, an event's request and reply JSON Schemas.
Must not: import the engine, the server, host I/O or the bridge link; do I/O. The built-in
policies (``policy_server.policies``, koordinator-qos among them) import only this face (an
import-linter contract): what they need, every author gets.
"""

from bridge.contract.catalogue import EventName
from bridge.contract.nri_version import nri_version_of
from bridge.contract.quantity import value_of as quantity_value
from bridge.contract.systemd_slice import parent_slice as systemd_parent_slice
from bridge.strict_yaml import one_line as yaml_problem
from policy_server.exceptions import PolicyError, PolicyLoadError, RulesError
from policy_server.sdk.contract_schema import reply_schema, request_schema
from policy_server.sdk.cpu_list import (
    canonical_cpu_list,
    check_cpu_list,
    format_cpu_list,
    parse_cpu_list,
)
from policy_server.sdk.decision import Adjustment, ContainerUpdate, Decision, Eviction
from policy_server.sdk.decision_json import adjustment_from_json, adjustment_to_json
from policy_server.sdk.decision_merge import merge
from policy_server.sdk.effects import (
    CgroupWrite,
    Effect,
    HostDirectory,
    ResctrlGroup,
    ResctrlGroupRemoval,
)
from policy_server.sdk.extension import (
    ConfigStatus,
    CounterSample,
    Extensions,
    PolicyHost,
    ReloadResult,
)
from policy_server.sdk.model import CPU, Container, Event, Image, Memory, Pod, Resources, User
from policy_server.sdk.node_facts import UNKNOWN_NODE, NodeFacts, NodeTopology
from policy_server.sdk.node_plan import (
    BVT_FILE,
    NO_NEEDS,
    NO_PLAN,
    SYSCTL_GROUP_IDENTITY,
    CoreSchedGroup,
    KernelSwitch,
    NodeNeeds,
    NodePlan,
    OomScore,
)
from policy_server.sdk.node_view import NodeView
from policy_server.sdk.oci import (
    Device,
    DeviceRule,
    Hook,
    HookStage,
    Mount,
    Rlimit,
    StagedHook,
    no_strings,
)
from policy_server.sdk.registry import FailurePolicy, Payload, Policy, PolicyState
from policy_server.sdk.resource_patch import NO_RESOURCES, ResourcePatch
from policy_server.sdk.validation import FieldOwners, Owners, Plugin

__all__ = [
    "BVT_FILE",
    "CPU",
    "NO_NEEDS",
    "NO_PLAN",
    "NO_RESOURCES",
    "SYSCTL_GROUP_IDENTITY",
    "UNKNOWN_NODE",
    "Adjustment",
    "CgroupWrite",
    "ConfigStatus",
    "Container",
    "ContainerUpdate",
    "CoreSchedGroup",
    "CounterSample",
    "Decision",
    "Device",
    "DeviceRule",
    "Effect",
    "Event",
    "EventName",
    "Eviction",
    "Extensions",
    "FailurePolicy",
    "FieldOwners",
    "Hook",
    "HookStage",
    "HostDirectory",
    "Image",
    "KernelSwitch",
    "Memory",
    "Mount",
    "NodeFacts",
    "NodeNeeds",
    "NodePlan",
    "NodeTopology",
    "NodeView",
    "OomScore",
    "Owners",
    "Payload",
    "Plugin",
    "Pod",
    "Policy",
    "PolicyError",
    "PolicyHost",
    "PolicyLoadError",
    "PolicyState",
    "ReloadResult",
    "ResctrlGroup",
    "ResctrlGroupRemoval",
    "ResourcePatch",
    "Resources",
    "Rlimit",
    "RulesError",
    "StagedHook",
    "User",
    "adjustment_from_json",
    "adjustment_to_json",
    "canonical_cpu_list",
    "check_cpu_list",
    "format_cpu_list",
    "merge",
    "no_strings",
    "nri_version_of",
    "parse_cpu_list",
    "quantity_value",
    "reply_schema",
    "request_schema",
    "systemd_parent_slice",
    "yaml_problem",
]
