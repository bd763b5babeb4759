"""The Plugin service (conn 1) of one connection: the runtime setup and the event dispatch.

Built by bridge.nri.stub (the composition root) for each connection; its method table joins
the setup calls of bridge.nri.runtime_setup (Configure, Synchronize, Shutdown) and the event
RPCs of bridge.nri.dispatch (every event RPC and StateChange). Must not build anything or hold
protocol logic of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bridge.contract.catalogue import NriEvent
from bridge.nri.dispatch import PLUGIN_SERVICE, EventDispatch, Method
from bridge.nri.event_call import RuntimeInfo
from bridge.nri.layers import GuardStats
from bridge.nri.runtime_setup import RuntimeSetup
from bridge.proto.nri import api_pb2 as api
from bridge.transport.ttrpc_server import MethodHandler


@dataclass(frozen=True, slots=True)
class SessionHooks:
    """What a connection's session gives its service: where late updates go and what it is
    told when Configure and Synchronize are done."""

    defer: Callable[[Sequence[api.ContainerUpdate]], None]
    on_configured: Callable[[RuntimeInfo], None]
    on_synchronized: Callable[[], None]


class PluginService:
    def __init__(self, setup: RuntimeSetup, dispatch: EventDispatch, stats: GuardStats) -> None:
        self.stats = stats
        self._setup = setup
        self._dispatch = dispatch

    @property
    def runtime(self) -> RuntimeInfo | None:
        return self._setup.runtime

    @property
    def subscribed(self) -> frozenset[NriEvent]:
        return self._setup.subscribed

    def table(self) -> dict[str, dict[str, MethodHandler]]:
        setup = self._setup
        return {PLUGIN_SERVICE: {
            "Configure": Method(api.ConfigureRequest, api.ConfigureResponse, setup.configure),
            "Synchronize": Method(api.SynchronizeRequest, api.SynchronizeResponse,
                                  setup.synchronize),
            "Shutdown": Method(api.Empty, api.Empty, setup.shutdown_rpc),
            **self._dispatch.table(),
        }}

    def shutdown(self) -> None:
        self._setup.shutdown()


ServiceFactory = Callable[[SessionHooks], PluginService]
