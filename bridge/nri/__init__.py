"""NRI semantics: the plugin core. Its face is `new_plugin` (bridge.nri.stub):

    runner = new_plugin(PluginIdentity("webhook-bridge", "50"), handler,
                        layers=[...], socket_path=..., updates=...)
    await runner.run()

`handler` is any EventHandler (bridge.nri.event_call; bridge.nri.handler_api's `Handler` for
per-event methods, bridge.nri.static's StaticHandler). Inside: the session per connection
(session.py, runner.py), the runtime setup (runtime_setup.py), the event dispatch
(dispatch.py), the core's layers (layers.py: the state cache, cache.py, and the deadline guard)
and where updates go (updates.py, update_routes.py).
"""

from bridge.nri.event_call import Answer, EventCall, EventHandler, RuntimeInfo
from bridge.nri.runner import Backoff, PluginRunner
from bridge.nri.runtime_setup import ServiceOptions
from bridge.nri.session import PluginIdentity
from bridge.nri.stub import Wrap, new_plugin

__all__ = ["Answer", "Backoff", "EventCall", "EventHandler", "PluginIdentity", "PluginRunner",
           "RuntimeInfo", "ServiceOptions", "Wrap", "new_plugin"]
