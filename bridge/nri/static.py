"""The built-in handler: logs every event and can apply a fixed adjustment.

Used for smoke tests, the real-containerd e2e and the no-webhook benchmark.
Its settings are the `static` section of the bridge config (or, for a plugin
launched by the runtime, the same YAML in the Configure config string):

    static:
      adjust: {...}     # ContainerAdjustment JSON, applied to every CreateContainer
      update: {...}     # ContainerUpdate JSON (no container_id), applied on UpdateContainer
      delay_ms: 0       # artificial handler delay, to prove the deadline guard
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from bridge.contract.catalogue import Event
from bridge.contract.codec import log_subject
from bridge.contract.convert import ConversionError, from_json
from bridge.errors import ConfigError
from bridge.nri.event_call import NO_CHANGE, Answer, EventCall, RuntimeInfo
from bridge.proto.nri import api_pb2 as api

log = logging.getLogger(__name__)

@dataclass(frozen=True, slots=True)
class StaticSettings:
    adjust: api.ContainerAdjustment | None = None
    update: api.ContainerUpdate | None = None
    delay_s: float = 0.0

    @classmethod
    def parse(cls, section: Any, key: str = "static") -> StaticSettings:
        if section is None:
            return cls()
        if not isinstance(section, dict):
            raise ConfigError(key, "must be a mapping")
        unknown = set(section) - {"adjust", "update", "delay_ms"}
        if unknown:
            raise ConfigError(f"{key}.{sorted(unknown)[0]}", "unknown key")
        try:
            adjust = (from_json(section["adjust"], api.ContainerAdjustment, f"{key}.adjust")
                      if section.get("adjust") is not None else None)
            update = (from_json(section["update"], api.ContainerUpdate, f"{key}.update")
                      if section.get("update") is not None else None)
        except ConversionError as exc:
            raise ConfigError(exc.path, exc.problem) from None
        delay = section.get("delay_ms", 0)
        if isinstance(delay, bool) or not isinstance(delay, int | float) or delay < 0:
            raise ConfigError(f"{key}.delay_ms", "must be a non-negative number")
        return cls(adjust=adjust, update=update, delay_s=float(delay) / 1000.0)


class StaticHandler:
    """Logs every event (validation aside, which would make the plugin a validator), waits
    `delay_s`, and answers CreateContainer / UpdateContainer with the fixed changes."""

    def __init__(self, settings: StaticSettings) -> None:
        self.settings = settings

    def wanted_events(self) -> frozenset[Event]:
        return frozenset(Event) - {Event.VALIDATE_CONTAINER_ADJUSTMENT}

    async def configure(self, runtime: RuntimeInfo) -> None:
        return None

    async def handle(self, call: EventCall) -> Answer:
        if call.event is None:
            log.info("event", extra={"event": "Synchronize", "uid": call.uid,
                                     "pods": len(call.pods), "containers": len(call.containers)})
            return NO_CHANGE
        if log.isEnabledFor(logging.INFO):  # the fields cost more than the call
            log.info("event", extra={"event": call.name, "uid": call.uid,
                                     "via": "StateChange" if call.via_state_change else "rpc",
                                     **log_subject(call.request)})
        if self.settings.delay_s:
            await asyncio.sleep(self.settings.delay_s)
        req = call.request
        if isinstance(req, api.CreateContainerRequest) and self.settings.adjust is not None:
            return Answer(api.CreateContainerResponse(adjust=self.settings.adjust))
        if isinstance(req, api.UpdateContainerRequest) and self.settings.update is not None:
            update = api.ContainerUpdate()
            update.CopyFrom(self.settings.update)
            update.container_id = req.container.id
            return Answer(api.UpdateContainerResponse(update=[update]))
        return NO_CHANGE
