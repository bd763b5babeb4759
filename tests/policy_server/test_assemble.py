"""policy_server.assemble: the one place the server is put together from ServerOptions."""

from __future__ import annotations

from bridge.listening.http_guard import GuardSettings, ListenerGuard
from bridge.listening.listener_config import Bounds
from policy_server.assemble import METRICS_GUARD, Listener, assemble
from policy_server.http_edge.hot_route import HotRoute
from policy_server.sdk import Policy
from policy_server.service import ServerOptions


def test_the_app_serves_the_assembled_server() -> None:
    assembly = assemble(ServerOptions(default_policies=False), extra_policies=[Policy("plain")])
    assert [p.name for p in assembly.server.registry] == ["plain"]
    assert isinstance(assembly.app, HotRoute)
    assert assembly.app.server is assembly.server


def test_the_listener_guards_the_app_uvicorn_serves() -> None:
    assembly = assemble(ServerOptions(default_policies=False), log_level="warning")
    guard = GuardSettings(bounds=Bounds(idle_timeout_s=7.5))
    config = assembly.config(Listener(guard))
    assert isinstance(config.app, ListenerGuard)
    assert config.app.app is assembly.app and config.app.settings is guard
    assert config.log_level == "warning"
    assert config.timeout_keep_alive == 8
    assert (config.lifespan, config.proxy_headers, config.server_header) == ("on", False, False)
    metrics = assembly.metrics_config()
    assert isinstance(metrics.app, ListenerGuard)
    assert metrics.lifespan == "off"
    assert metrics.timeout_keep_alive >= METRICS_GUARD.bounds.idle_timeout_s
