"""The reply a policy returns (pydantic models). The request is declared once, as msgspec
Structs (bridge.contract.request_structs), not here.

Imported lazily: the bridge's serving path does not need pydantic models (about
7 MB of memory); the policy server and the schema generator do.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from bridge.contract.catalogue import API_VERSION, EVENT_NAMES
from bridge.contract.nri_models import nri_model

ContainerAdjustmentBody: Any = nri_model("ContainerAdjustment")
LinuxContainerUpdate: Any = nri_model("LinuxContainerUpdate")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Removals(_Strict):
    """Entries to remove; NRI's '-' key markers are produced by the bridge."""

    annotations: list[str] | None = None
    mounts: list[str] | None = Field(None, description="mount destinations")
    env: list[str] | None = Field(None, description="variable names (only undoes other "
                                  "plugins' additions; the runtime keeps pre-existing ones)")
    devices: list[str] | None = Field(None, description="device paths")
    namespaces: list[str] | None = Field(None, description="namespace types")
    sysctl: list[str] | None = None
    net_devices: list[str] | None = Field(None, description="host device names")


class Adjustment(ContainerAdjustmentBody):  # type: ignore[misc]
    """A ContainerAdjustment (CreateContainer only) plus explicit removals."""

    remove: Removals | None = None


class Update(_Strict):
    container_id: str = Field(min_length=1)
    linux: LinuxContainerUpdate | None = None
    ignore_failure: bool | None = None


class Eviction(_Strict):
    container_id: str = Field(min_length=1)
    reason: str = ""


class Reject(_Strict):
    reason: str = Field(min_length=1, max_length=4096)


class WebhookReply(_Strict):
    """A policy's answer. Every key is optional; {} means no change."""

    adjust: Adjustment | None = Field(None, description="CreateContainer only")
    update: list[Update] | None = Field(
        None, description="resource updates for existing containers (CreateContainer, "
        "UpdateContainer, StopContainer, Synchronize)")
    evict: list[Eviction] | None = Field(None, description="accepted for completeness; "
                                         "NRI runtimes drop evictions")
    reject: Reject | None = Field(None, description="fail this operation with a reason")
    warnings: list[str] | None = Field(None, max_length=100)


__all__ = ["API_VERSION", "EVENT_NAMES", "Adjustment", "Eviction", "Reject", "Removals",
           "Update", "WebhookReply"]
