"""nri-policy-server: policies as HTTP endpoints for nri-webhook-bridge, and the SDK to write them.

A policy is a ``Policy`` whose handlers are plain functions registered by decorator per NRI
event (event in, decision out, no I/O). The names below are the SDK's public surface.
"""

from bridge.contract.catalogue import EventName
from policy_server.decision import (
    Adjustment,
    CgroupWrite,
    ContainerUpdate,
    Decision,
    Eviction,
    ResourcePatch,
)
from policy_server.exceptions import PolicyError
from policy_server.model import Container, Event, Mount, Pod, Resources
from policy_server.node import NodeView
from policy_server.registry import FailurePolicy, Policy

__all__ = [
    "Adjustment",
    "CgroupWrite",
    "Container",
    "ContainerUpdate",
    "Decision",
    "Event",
    "EventName",
    "Eviction",
    "FailurePolicy",
    "Mount",
    "NodeView",
    "Pod",
    "Policy",
    "PolicyError",
    "ResourcePatch",
    "Resources",
]
