"""The Plugin service (conn 1): the runtime's setup calls and the event dispatch over one chain.

Builds the plugin core's event path around the handler it is given:
`StateTracking(DeadlineGuard(handler))` (the tracking only with `track_state`), and the method
table from bridge.nri.runtime_setup (Configure, Synchronize, Shutdown) and bridge.nri.dispatch
(every event RPC and StateChange). Must not hold protocol logic of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bridge.contract.catalogue import NriEvent
from bridge.nri.cache import StateCache
from bridge.nri.dispatch import PLUGIN_SERVICE, EventDispatch
from bridge.nri.event_call import EventHandler, RuntimeInfo
from bridge.nri.layers import DeadlineGuard, GuardStats, StateTracking
from bridge.nri.runtime_setup import DEFAULT_REGISTRATION_TIMEOUT_S, RuntimeSetup, ServiceOptions
from bridge.proto.nri import api_pb2 as api
from bridge.transport.ttrpc_server import MethodHandler

__all__ = ["DEFAULT_REGISTRATION_TIMEOUT_S", "PLUGIN_SERVICE", "PluginService",
           "ServiceOptions"]


class PluginService:
    def __init__(
        self,
        handler: EventHandler,
        cache: StateCache,
        defer_updates: Callable[[Sequence[api.ContainerUpdate]], None],
        options: ServiceOptions,
        on_configured: Callable[[RuntimeInfo], None],
        on_synchronized: Callable[[], None],
    ) -> None:
        self.stats = GuardStats()
        chain: EventHandler = DeadlineGuard(handler, self.stats)
        if options.track_state:
            chain = StateTracking(chain, cache)
        self._setup = RuntimeSetup(chain, defer_updates, options, self.stats,
                                    on_configured, on_synchronized)
        self._dispatch = EventDispatch(self._setup, chain)

    @property
    def runtime(self) -> RuntimeInfo | None:
        return self._setup.runtime

    @property
    def subscribed(self) -> frozenset[NriEvent]:
        return self._setup.subscribed

    def table(self) -> dict[str, dict[str, MethodHandler]]:
        return {PLUGIN_SERVICE: self._dispatch.table()}

    def shutdown(self) -> None:
        self._setup.shutdown()
