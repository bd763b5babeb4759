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
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

from bridge.contract.catalogue import NriEvent
from bridge.contract.codec import log_subject
from bridge.contract.convert import ConversionError, from_json
from bridge.errors import ConfigError
from bridge.nri.event_call import NO_CHANGE, Answer, EventCall, RuntimeInfo
from bridge.proto.nri import api_pb2 as api

log = logging.getLogger(__name__)

def _delay_ms(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ValueError("must be a non-negative number")
    return float(value)


class _Static(BaseModel):
    """The `static:` section as written. `adjust` / `update` are NRI messages in JSON, converted
    by the contract (whose errors name the path inside them)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    adjust: Any = None
    update: Any = None
    delay_ms: Annotated[float, BeforeValidator(_delay_ms)] = 0.0


@dataclass(frozen=True, slots=True)
class StaticSettings:
    adjust: api.ContainerAdjustment | None = None
    update: api.ContainerUpdate | None = None
    delay_s: float = 0.0

    @classmethod
    def parse(cls, section: Any, key: str = "static") -> StaticSettings:
        """Validate the `static:` section; raises ConfigError naming the first bad key."""
        if section is None:
            return cls()
        if not isinstance(section, dict):
            raise ConfigError(key, "must be a mapping")
        try:
            model = _Static.model_validate(section)
        except ValidationError as exc:
            raise ConfigError.first_of(exc.errors(), key) from None
        try:
            adjust = (from_json(model.adjust, api.ContainerAdjustment, f"{key}.adjust")
                      if model.adjust is not None else None)
            update = (from_json(model.update, api.ContainerUpdate, f"{key}.update")
                      if model.update is not None else None)
        except ConversionError as exc:
            raise ConfigError(exc.path, exc.problem) from None
        return cls(adjust=adjust, update=update, delay_s=model.delay_ms / 1000.0)


class StaticHandler:
    """Logs every event (validation aside, which would make the plugin a validator), waits
    `delay_s`, and answers CreateContainer / UpdateContainer with the fixed changes."""

    def __init__(self, settings: StaticSettings) -> None:
        self.settings = settings

    def wanted_events(self) -> frozenset[NriEvent]:
        return frozenset(NriEvent) - {NriEvent.VALIDATE_CONTAINER_ADJUSTMENT}

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
