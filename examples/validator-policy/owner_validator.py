"""A validating policy written with the SDK: reject a container adjustment by who made it.

On runtimes with NRI v0.10+ (containerd 2.2+, CRI-O 1.34+) a webhook subscribed to
ValidateContainerAdjustment sees, after every NRI plugin answered CreateContainer, the merged
adjustment (``event.adjust``), who set each field (``event.owners``) and the plugins connected
(``event.plugins``); docs/webhooks.md, "Validating webhooks". This one lets only the plugins in
``TRUSTED`` change a container's CPU and memory, and refuses a privileged container's devices
from anyone: the runtime then fails the container's creation with the reason.

Serve it with ``nri-policy-server --policy-module examples/validator-policy/owner_validator.py``
and subscribe a webhook to ValidateContainerAdjustment (docs/configuration.md).
"""

from __future__ import annotations

from policy_server import Decision, Event, EventName, Policy

# Plugin names (the runtime labels a plugin "NN-name": the index is left out here).
TRUSTED = frozenset({"webhook-bridge"})
# NRI's names of the resource fields only a trusted plugin may set (bridge/contract/owner_fields).
GUARDED = ("CPUShares", "CPUQuota", "CPUPeriod", "CPUSetCPUs", "CPUSetMems", "MemLimit")

policy = Policy("owner-validator", description="only trusted NRI plugins change CPU and memory")


def _name(label: str) -> str:
    """``10-webhook-bridge`` -> ``webhook-bridge``."""
    index, _, name = label.partition("-")
    return name if index.isdigit() else label


@policy.on(EventName.VALIDATE_CONTAINER_ADJUSTMENT)
def trusted_resources_only(event: Event) -> Decision | None:
    if event.container is None or event.adjust is None:
        return None
    cid = event.container.id
    for field in GUARDED:
        owner = event.owners.owner(cid, field)
        if owner is not None and _name(owner) not in TRUSTED:
            return Decision(reject=f"{field} set by {owner}, which may not change resources")
    if event.adjust.devices:
        owners = {event.owners.owner(cid, "Devices", d.path) or "?" for d in event.adjust.devices}
        return Decision(reject=f"devices added by {', '.join(sorted(owners))}")
    return None
