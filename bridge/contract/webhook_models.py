"""The request envelope the bridge POSTs (pydantic models); the reply's are reply_models'.

Imported lazily: the bridge's serving path does not need pydantic models (about
7 MB of memory); the policy server and the schema generator do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from bridge.contract.catalogue import API_VERSION, EVENT_NAMES
from bridge.contract.nri_models import nri_model
from bridge.contract.reply_models import Eviction, Reject, WebhookReply
from bridge.contract.value_rules import REMOVAL_KEYS, REMOVAL_NAMES_ARE

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


# The request's removals (ValidateContainerAdjustment's merged `adjust`): the reply's keys,
# without the reply's name rules (another plugin's names are what they are).
Removals: Any = create_model(  # type: ignore[call-overload]
    "Removals", __base__=_Strict, __module__=__name__,
    __doc__="Entries to remove; NRI's '-' key markers are produced by the bridge.",
    **{key: (list[str] | None, Field(None, description=REMOVAL_NAMES_ARE[key]))
       for key in REMOVAL_KEYS})


class Adjustment(ContainerAdjustmentBody):  # type: ignore[misc]
    """A ContainerAdjustment plus explicit removals (the request's: no value rules)."""

    remove: Removals | None = None


class Update(_Strict):
    container_id: str = Field(min_length=1)
    linux: LinuxContainerUpdate | None = None
    ignore_failure: bool | None = None


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


__all__ = ["API_VERSION", "EVENT_NAMES", "Adjustment", "Eviction", "Reject", "Removals",
           "RuntimeRef", "Update", "WebhookReply", "WebhookRequest"]
