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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bridge.contract.convert import ConversionError, from_json
from bridge.errors import ConfigError
from bridge.nri.handler_api import EventContext, UniformHandler, log_subject
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


class StaticHandler(UniformHandler):
    def __init__(self, settings: StaticSettings) -> None:
        self.settings = settings

    async def on_event(self, ctx: EventContext, req: Any) -> None:
        if log.isEnabledFor(logging.INFO):  # the fields cost more than the call
            log.info("event", extra={"event": ctx.name, "uid": ctx.uid,
                                     "via": "StateChange" if ctx.via_state_change else "rpc",
                                     **log_subject(req)})
        if self.settings.delay_s:
            await asyncio.sleep(self.settings.delay_s)

    async def synchronize(self, ctx: EventContext, pods: Sequence[api.PodSandbox],
                          containers: Sequence[api.Container]) -> Sequence[api.ContainerUpdate]:
        log.info("event", extra={"event": "Synchronize", "uid": ctx.uid, "pods": len(pods),
                                 "containers": len(containers)})
        return ()

    async def create_container(self, ctx: EventContext, req: api.CreateContainerRequest,
                               ) -> api.CreateContainerResponse | None:
        await self.on_event(ctx, req)
        if self.settings.adjust is None:
            return None
        return api.CreateContainerResponse(adjust=self.settings.adjust)

    async def update_container(self, ctx: EventContext, req: api.UpdateContainerRequest,
                               ) -> api.UpdateContainerResponse | None:
        await self.on_event(ctx, req)
        if self.settings.update is None:
            return None
        update = api.ContainerUpdate()
        update.CopyFrom(self.settings.update)
        update.container_id = req.container.id
        return api.UpdateContainerResponse(update=[update])

