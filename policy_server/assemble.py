"""The one place the policy server is put together: ``assemble(options)`` builds all of it.

Owns the order of the parts, built from ``ServerOptions``: the ``PolicyServer`` (registry and
built-in policies, engine, node-effect executor, bridge link, reconciler, settle step, resync:
``service.composition``), the ASGI app in front of it (``http_edge.asgi.create_app``: the hot
webhook route, then FastAPI), the uvicorn configuration that serves that app behind a
listener's guard (``Listener``, which ``main`` makes from the command line; bridge.listening:
peer, token, Host/Origin, body size, timeouts, the connection cap) on the single-write
protocol (``http_edge.http_protocol``), and the one that serves ``GET /metrics`` alone.
``main`` parses the command line, binds the sockets and runs what this builds; tests build the
server here too.

Must not: parse flags, bind sockets or handle the stop signals (``main``'s), or hold policy
logic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import uvicorn

from bridge.listening.bounded_protocol import protocol_class
from bridge.listening.http_guard import GuardSettings, ListenerGuard
from bridge.listening.listener_config import METRICS_BODY_BYTES, METRICS_MAX_CONNECTIONS, Bounds
from policy_server.bridge_link.control_client import BridgeControl
from policy_server.http_edge.asgi import create_app, create_metrics_app
from policy_server.http_edge.hot_route import HotRoute
from policy_server.http_edge.http_protocol import CoalescingHttpToolsProtocol
from policy_server.sdk.registry import Policy
from policy_server.service import PolicyServer, ServerOptions

METRICS_GUARD = GuardSettings(
    bounds=Bounds(max_body_bytes=METRICS_BODY_BYTES, max_connections=METRICS_MAX_CONNECTIONS),
    check_origin=False,
    json_only=False,
)


@dataclass(frozen=True)
class Listener:
    """What the main listener is served with: its guard and uvicorn's TLS options."""

    guard: GuardSettings = field(default_factory=lambda: GuardSettings(bounds=Bounds()))
    tls: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Assembly:
    """The whole policy server: ``server`` (no HTTP), ``app`` (its ASGI app, unguarded: what
    tests drive in-process) and how uvicorn serves them."""

    server: PolicyServer
    app: HotRoute
    log_level: str = "info"

    def config(self, listener: Listener | None = None) -> uvicorn.Config:
        """The main listener's uvicorn configuration (``listener``: ``main`` makes it from the
        command line; the default is bounded and checks nothing else)."""
        listener = listener or Listener()
        # log_config=None: uvicorn's loggers propagate to our root handler (same line format).
        # http: httptools with a response's header and body writes sent as one
        # (http_protocol). proxy_headers=False: no X-Forwarded-* rewriting, a middleware layer
        # less per request (the bridge connects directly); no Server and Date headers either,
        # which nobody reads. Every request passes the listener's guard first (peer, token,
        # Host/Origin, JSON, body size: bridge.listening.http_guard); the protocol bounds the
        # connection (timeouts, cap).
        guard = listener.guard
        return uvicorn.Config(
            ListenerGuard(self.app, guard),
            log_level=self.log_level,
            access_log=False,
            lifespan="on",
            log_config=None,
            http=protocol_class(guard.bounds, CoalescingHttpToolsProtocol),
            timeout_keep_alive=max(1, math.ceil(guard.bounds.idle_timeout_s)),
            proxy_headers=False,
            server_header=False,
            date_header=False,
            **listener.tls,
        )

    def metrics_config(self) -> uvicorn.Config:
        """The ``--metrics-address`` listener's: ``GET /metrics`` and nothing else."""
        return uvicorn.Config(
            ListenerGuard(create_metrics_app(self.server), METRICS_GUARD),
            log_config=None,
            access_log=False,
            lifespan="off",
            http=protocol_class(METRICS_GUARD.bounds),
            timeout_keep_alive=max(1, math.ceil(METRICS_GUARD.bounds.idle_timeout_s)),
        )


def assemble(
    options: ServerOptions,
    *,
    log_level: str = "info",
    extra_policies: Sequence[Policy[Any]] = (),
    bridge: BridgeControl | None = None,
) -> Assembly:
    """Build the policy server from ``options``; a bad configuration raises here, before
    anything listens. ``extra_policies`` are served besides the configured ones and ``bridge``
    replaces the control client ``options`` describe (both for tests)."""
    server = PolicyServer(options, extra_policies, bridge)
    return Assembly(server, create_app(server), log_level)
