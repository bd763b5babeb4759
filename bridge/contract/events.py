"""Per-event shape of the contract: which payload keys a request carries and
which reply keys a policy may use for that event (protocol §4.5)."""

from __future__ import annotations

API_VERSION = "nri-webhook-bridge/v1"

EVENT_NAMES = (
    "Synchronize", "RunPodSandbox", "UpdatePodSandbox", "PostUpdatePodSandbox",
    "StopPodSandbox", "RemovePodSandbox", "CreateContainer", "PostCreateContainer",
    "StartContainer", "PostStartContainer", "UpdateContainer", "PostUpdateContainer",
    "StopContainer", "RemoveContainer", "ValidateContainerAdjustment",
)

REQUEST_PAYLOAD: dict[str, tuple[str, ...]] = {
    "Synchronize": ("pods", "containers"),
    "RunPodSandbox": ("pod",),
    "UpdatePodSandbox": ("pod", "overhead_linux_resources", "linux_resources"),
    "PostUpdatePodSandbox": ("pod",),
    "StopPodSandbox": ("pod",),
    "RemovePodSandbox": ("pod",),
    "CreateContainer": ("pod", "container"),
    "PostCreateContainer": ("pod", "container"),
    "StartContainer": ("pod", "container"),
    "PostStartContainer": ("pod", "container"),
    "UpdateContainer": ("pod", "container", "linux_resources"),
    "PostUpdateContainer": ("pod", "container"),
    "StopContainer": ("pod", "container"),
    "RemoveContainer": ("pod", "container"),
    "ValidateContainerAdjustment": ("pod", "container", "adjust", "update", "owners", "plugins"),
}
REQUIRED_PAYLOAD: dict[str, tuple[str, ...]] = {
    event: tuple(k for k in keys if k in ("pod", "container", "pods", "containers"))
    for event, keys in REQUEST_PAYLOAD.items()
}

# Reply keys that mean something for each event; others are a contract violation.
REPLY_KEYS: dict[str, tuple[str, ...]] = {
    "CreateContainer": ("adjust", "update", "evict", "reject", "warnings"),
    "UpdateContainer": ("update", "evict", "reject", "warnings"),
    "StopContainer": ("update", "reject", "warnings"),
    "Synchronize": ("update", "warnings"),
    "RunPodSandbox": ("reject", "warnings"),
    "UpdatePodSandbox": ("reject", "warnings"),
    "StartContainer": ("reject", "warnings"),
    "ValidateContainerAdjustment": ("reject", "warnings"),
}
# Post-events and removals cannot change or fail anything.
for _event in REQUEST_PAYLOAD:
    REPLY_KEYS.setdefault(_event, ("warnings",))
