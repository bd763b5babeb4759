"""CRI calls as a runtime turns them into NRI events: one table.

One CRI call becomes one to three NRI events, in this order (recorded from containerd
1.7.24-2.4.0-beta.0 and CRI-O 1.36.3, bridge/simulator/scenarios): CreateContainer ->
CreateContainer (+ validation, v0.10+) then PostCreateContainer; StartContainer ->
StartContainer then PostStartContainer; UpdateContainerResources -> UpdateContainer then
PostUpdateContainer;
UpdatePodSandboxResources -> UpdatePodSandbox then PostUpdatePodSandbox. Which of them a
runtime build actually sends is its profile's business (`RuntimeProfile.delivers`: containerd
2.2.x leaves pod resize unimplemented, CRI-O sends no PostUpdatePodSandbox); a failed
pre-event fails the CRI call, so its post-event is not sent.

Owns: that table, read by the simulator's `run_cri` and the test kit's `send_pod`.
Must not: run anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from bridge.contract.catalogue import NriEvent

CRI_EVENTS: Mapping[str, tuple[NriEvent, ...]] = MappingProxyType({
    "RunPodSandbox": (NriEvent.RUN_POD_SANDBOX,),
    "StopPodSandbox": (NriEvent.STOP_POD_SANDBOX,),
    "RemovePodSandbox": (NriEvent.REMOVE_POD_SANDBOX,),
    "UpdatePodSandboxResources": (NriEvent.UPDATE_POD_SANDBOX, NriEvent.POST_UPDATE_POD_SANDBOX),
    "CreateContainer": (NriEvent.CREATE_CONTAINER, NriEvent.POST_CREATE_CONTAINER),
    "StartContainer": (NriEvent.START_CONTAINER, NriEvent.POST_START_CONTAINER),
    "UpdateContainerResources": (NriEvent.UPDATE_CONTAINER, NriEvent.POST_UPDATE_CONTAINER),
    "StopContainer": (NriEvent.STOP_CONTAINER,),
    "RemoveContainer": (NriEvent.REMOVE_CONTAINER,),
})
