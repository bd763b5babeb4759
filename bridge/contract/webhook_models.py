"""The request envelope the bridge POSTs and the reply a policy returns (pydantic models).

Imported lazily: the bridge's serving path does not need pydantic models (about
7 MB of memory); the policy server and the schema generator do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from bridge.contract.catalogue import API_VERSION, EVENT_NAMES
from bridge.contract.nri_models import nri_model

# The event key's type: a Literal of the catalogue's names (an enum would make the JSON Schema
# a $ref instead of an inline list). The type checker sees a plain str.
if TYPE_CHECKING:
    EventLiteral = str
    ApiVersionLiteral = str
else:
    EventLiteral = Literal[EVENT_NAMES]
    ApiVersionLiteral = Literal[API_VERSION]

PodSandbox: Any = nri_model("PodSandbox")
Container: Any = nri_model("Container")
LinuxResources: Any = nri_model("LinuxResources")
ContainerAdjustmentBody: Any = nri_model("ContainerAdjustment")
LinuxContainerUpdate: Any = nri_model("LinuxContainerUpdate")
OwningPlugins: Any = nri_model("OwningPlugins")
PluginInstance: Any = nri_model("PluginInstance")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RuntimeRef(_Strict):
    name: str = Field(description="runtime name as sent in Configure, e.g. containerd")
    version: str = Field(description="runtime version, e.g. 1.7.24~ds1")
    nri_version: str | None = Field(
        None, description="the runtime's NRI version, e.g. v0.11.0: as the runtime reported "
        "it (NRI v0.12+), else inferred from name and version; null if unknown")
    capabilities: list[str] | None = Field(
        None, description="adjustment fields this runtime's NRI version applies, by path "
        "(e.g. linux.resources.pids, args, linux.sysctl); a field not listed is dropped: "
        "silently by the runtime, or, if it would crash the runtime (linux.sysctl on NRI "
        "v0.11), by the bridge; null if the NRI version is unknown")


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


class WebhookRequest(_Strict):
    """What the bridge POSTs to a policy for one NRI event."""

    api_version: ApiVersionLiteral = API_VERSION
    uid: str = Field(description="unique id of this request, for logs and idempotency")
    event: EventLiteral
    runtime: RuntimeRef
    budget_ms: int = Field(ge=0, description="time left to answer before the bridge gives up")
    dry_run: bool = Field(False, description="true when the reply will not be applied "
                          "(shadow mode, replay)")
    pod: PodSandbox | None = None
    container: Container | None = None
    linux_resources: LinuxResources | None = Field(
        None, description="UpdateContainer / UpdatePodSandbox: the requested resources")
    overhead_linux_resources: LinuxResources | None = None
    pods: list[PodSandbox] | None = Field(None, description="Synchronize: every pod")
    containers: list[Container] | None = Field(None, description="Synchronize: every container")
    adjust: Adjustment | None = Field(
        None, description="ValidateContainerAdjustment: the merged adjustment")
    update: list[Update] | None = Field(
        None, description="ValidateContainerAdjustment: the merged updates")
    owners: OwningPlugins | None = None
    plugins: list[PluginInstance] | None = None


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
           "RuntimeRef", "Update", "WebhookReply", "WebhookRequest"]
