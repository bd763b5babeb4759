"""The policy server minus HTTP (``server/`` is the HTTP side): composition and the settle step.

``composition.PolicyServer`` builds the parts from ``options.ServerOptions`` and owns their
lifetime; ``settle`` settles one evaluation's decision into the reply, the node effects and the
pushes (metrics, node effects, the rdt_class rule, pushes, warnings) for every caller alike;
``resync_schedule`` says when to recompute every container and
``resync`` does it; ``node_status`` is the probed node-effect status; ``policy_host`` is the
SDK's extension points seen from the server. Must not import web frameworks.
"""

from policy_server.service.composition import PolicyServer
from policy_server.service.options import BRIDGE_START_WAIT_S, POLL_INTERVAL_S, ServerOptions

__all__ = ["BRIDGE_START_WAIT_S", "POLL_INTERVAL_S", "PolicyServer", "ServerOptions"]
