"""The policy server minus HTTP (``server/`` is the HTTP side): composition and request steps.

``composition.PolicyServer`` builds the parts from ``options.ServerOptions`` and owns their
lifetime; ``request_steps`` finishes one evaluation's decision (metrics, node effects, the
rdt_class rule, pushes, warnings); ``resync_schedule`` says when to recompute every container and
``resync`` does it; ``node_status`` is the probed node-effect status; ``policy_host`` is the
SDK's extension points seen from the server. Must not import web frameworks.
"""

from policy_server.service.composition import PolicyServer
from policy_server.service.options import BRIDGE_START_WAIT_S, POLL_INTERVAL_S, ServerOptions

__all__ = ["BRIDGE_START_WAIT_S", "POLL_INTERVAL_S", "PolicyServer", "ServerOptions"]
