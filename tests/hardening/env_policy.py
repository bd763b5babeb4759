"""The policy the fault tests serve through `nri-policy-server --policy-module`.

CreateContainer gets the env var HARDENED=1, so a test can tell a container the
policy decided from one the bridge let through on its own (failure policy Ignore).
"""

from __future__ import annotations

from policy_server import Adjustment, Decision, Event, EventName, Policy

policy = Policy("hardening", description="CreateContainer -> env HARDENED=1")


@policy.on(EventName.CREATE_CONTAINER)
def mark(event: Event) -> Decision:
    return Decision(adjust=Adjustment(env={"HARDENED": "1"}))
