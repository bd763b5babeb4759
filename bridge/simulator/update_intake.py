"""Unsolicited updates arriving at the simulated runtime, and the record tests read of them.

Owns: applying the updates of a plugin's UpdateContainers to the runtime's containers as
containerd does (unknown ids skipped silently, a failed one kept in `failed_updates`), noting an
UpdateContainers on a profile where it can deadlock the runtime (`unsafe_updates`,
docs/protocol.md#unsolicited-updates-and-the-runtimes-locks), the updates that came through CRI
UpdateContainerResources (`cri_updates`), and waiting for a number of them. Must not: take the
runtime's lock or answer the plugin (bridge.simulator.plugin_start does both).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from bridge.proto.nri import api_pb2 as api
from bridge.runtime_facts.profiles import RuntimeProfile
from bridge.simulator.state import RuntimeState

log = logging.getLogger(__name__)


class UpdateIntake:
    """Every unsolicited update the runtime received, NRI or CRI, in arrival order."""

    def __init__(self, profile: RuntimeProfile) -> None:
        self.profile = profile
        self.updates: list[api.ContainerUpdate] = []
        self.cri_updates: list[api.ContainerUpdate] = []  # those that came through CRI
        # UpdateContainers calls on a profile they can deadlock (plugin label, update count).
        self.unsafe_updates: list[tuple[str, int]] = []
        self.failed_updates: list[api.ContainerUpdate] = []
        self._arrived = asyncio.Event()

    def note_call(self, plugin: str, count: int) -> None:
        """A plugin called UpdateContainers with `count` updates."""
        if self.profile.plugin_updates_deadlock:
            log.warning("%s: UpdateContainers from plugin %s can deadlock %s (NRI v%d.%d.%d)",
                        self.profile.key, plugin, self.profile.runtime_name, *self.profile.nri)
            self.unsafe_updates.append((plugin, count))

    def apply(self, updates: Sequence[api.ContainerUpdate],
              state: RuntimeState) -> list[api.ContainerUpdate]:
        """Apply a plugin's updates to `state` (under the runtime's lock); the failed ones."""
        failed: list[api.ContainerUpdate] = []
        for update in updates:
            self.updates.append(update)
            if update.container_id not in state.containers:
                continue  # unknown ids are skipped silently (containerd)
            if not state.apply_update(update):
                failed.append(update)
        self.failed_updates.extend(failed)
        self._arrived.set()
        return failed

    def note_cri(self, update: api.ContainerUpdate) -> None:
        """An update that came through CRI UpdateContainerResources."""
        self.updates.append(update)
        self.cri_updates.append(update)
        self._arrived.set()

    async def wait(self, count: int, timeout_s: float) -> list[api.ContainerUpdate]:
        """Wait until `count` updates in total arrived (NRI or CRI)."""
        async with asyncio.timeout(timeout_s):
            while len(self.updates) < count:
                self._arrived.clear()
                await self._arrived.wait()
        return list(self.updates)
