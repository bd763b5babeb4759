"""The plugin core's composition root: `new_plugin(identity, handler, ...)` builds everything.

In the spirit of containerd/nri's `stub.New(plugin, opts...)`: the caller hands over its
EventHandler and options, and this module alone puts the chain together. Around the handler go
the caller's `layers` (innermost first: the recording, bridge.record.recording_handler), then
the plugin core's own, per connection: `StateTracking(DeadlineGuard(...))` (the tracking only
with `ServiceOptions.track_state`, bridge.nri.layers), the runtime setup (Configure, Synchronize,
Shutdown: bridge.nri.runtime_setup) and the event dispatch (bridge.nri.dispatch), which is
handed its call factory once, when Configure has said what the runtime is. The runner
(bridge.nri.runner) keeps a session per connection and asks `connect` for each one's service.

Owns: which object wraps which. Must not: hold protocol logic or know what handlers do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bridge.call_watch import CallWatch
from bridge.nri.cache import StateCache
from bridge.nri.dispatch import EventDispatch
from bridge.nri.event_call import EventHandler
from bridge.nri.layers import DeadlineGuard, GuardStats, StateTracking
from bridge.nri.runner import Backoff, PluginRunner
from bridge.nri.runtime_setup import UNCONFIGURED, CallFactory, RuntimeSetup, ServiceOptions
from bridge.nri.service import PluginService, SessionHooks
from bridge.nri.session import PluginIdentity
from bridge.nri.update_routes import UpdateSettings
from bridge.transport import connect as transport_connect

Wrap = Callable[[EventHandler], EventHandler]


def new_plugin(identity: PluginIdentity, handler: EventHandler, *,
               layers: Sequence[Wrap] = (),
               socket_path: str = transport_connect.DEFAULT_SOCKET_PATH, fd: int | None = None,
               options: ServiceOptions | None = None, backoff: Backoff | None = None,
               cache: StateCache | None = None, updates: UpdateSettings | None = None,
               calls: CallWatch | None = None) -> PluginRunner:
    """The plugin for `handler`, ready to `run()`: see the module docstring."""
    served = handler
    for wrap in layers:
        served = wrap(served)
    options = options or ServiceOptions()
    cache = cache if cache is not None else StateCache()

    def connect(hooks: SessionHooks) -> PluginService:
        return plugin_service(served, cache, hooks, options)

    return PluginRunner(identity, connect, socket_path=socket_path, fd=fd,
                        backoff=backoff, cache=cache, updates=updates, calls=calls)


def plugin_service(handler: EventHandler, cache: StateCache, hooks: SessionHooks,
                   options: ServiceOptions) -> PluginService:
    """One connection's service around `handler` (already in the caller's layers)."""
    stats = GuardStats()
    chain: EventHandler = DeadlineGuard(handler, stats)
    if options.track_state:
        chain = StateTracking(chain, cache)
    dispatch = EventDispatch(chain, CallFactory(UNCONFIGURED, hooks.defer, options))
    setup = RuntimeSetup(chain, hooks.defer, options, stats, on_configured=hooks.on_configured,
                         on_synchronized=hooks.on_synchronized, on_calls=dispatch.start)
    return PluginService(setup, dispatch, stats)
