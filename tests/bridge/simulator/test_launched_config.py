"""A launched bridge takes its configuration from Configure.config (the runtime's
conf.d/NN-name.conf, docs/protocol.md#launched-plugins); a bad one is refused at Configure; --config
wins."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from bridge.config_file import parse
from bridge.configured import ConfiguredHandler
from bridge.metrics import BridgeMetrics
from bridge.nri.handler_api import RuntimeInfo
from bridge.nri.static import StaticHandler
from bridge.simulator import SimulatedRuntime
from bridge.simulator.synthetic import template
from bridge.webhooks.webhook_handler import WebhookHandler
from tests.waiting import until_exited

# Python's start and the bridge's imports can take seconds on a busy machine: the runtime's
# registration window (5 s by default, as containerd's) is widened, so only a bridge that never
# registers fails here (tests/bridge/simulator/test_launched.py says the same).
STARTUP_S = 25.0
CONF_D = json.dumps({"static": {"adjust": {"env": [{"key": "FROM_CONF_D", "value": "yes"}]}}})


@pytest.mark.processes
@pytest.mark.timeout(40)
async def test_launched_bridge_is_configured_from_the_runtime_config_string(
        tmp_path: Path) -> None:
    runtime = SimulatedRuntime(str(tmp_path / "unused.sock"), "containerd-2.1.9", config=CONF_D,
                               registration_timeout_s=STARTUP_S, request_timeout_s=10.0)
    await runtime.start()
    proc = runtime.launch([sys.executable, "-m", "bridge"], name="webhook-bridge", index="07")
    try:
        await runtime.wait_plugin(timeout_s=30)
        pod, container = template()
        result = await runtime.create_container(pod, container)
        assert result.ok and result.container is not None
        assert "FROM_CONF_D=yes" in result.container.env
    finally:
        await runtime.stop()
        try:
            code = await until_exited(proc, what="the launched bridge exits", timeout_s=10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=5)
    assert code == 0


@pytest.mark.processes
@pytest.mark.timeout(40)
async def test_a_bad_config_string_is_refused_at_configure(tmp_path: Path) -> None:
    bad = "webhooks:\n  - name: p\n    url: unix:///x.sock/v1\n    timeout: soon\n"
    runtime = SimulatedRuntime(str(tmp_path / "unused.sock"), "containerd-2.1.9", config=bad,
                               registration_timeout_s=STARTUP_S)
    await runtime.start()
    log = tmp_path / "bridge.log"
    proc = runtime.launch([sys.executable, "-m", "bridge", "--log-file", str(log),
                           "--log-format", "json", "--control-socket", ""],
                          name="webhook-bridge", index="07")
    try:
        # The runtime drops the plugin (and would kill it); the bridge exits by itself.
        await until_exited(proc, what="the half-configured bridge exits", timeout_s=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
        await runtime.stop()
    [(label, reason)] = runtime.closed_plugins
    assert label.startswith("07-webhook-bridge")
    assert "failed to configure plugin" in reason
    assert "invalid plugin configuration: webhooks[0].timeout" in reason
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    errors = [line for line in lines if line.get("level") == "error"]
    assert [e.get("key") for e in errors] == ["webhooks[0].timeout"], log.read_text()
    assert "expected a duration" in errors[0]["error"]


def _runtime(config: str) -> RuntimeInfo:
    return RuntimeInfo("containerd", "v2.2.7", (0, 11, 0), config, 5.0, 2.0)


async def test_config_file_wins_over_the_runtime_string() -> None:
    hooks = {"webhooks": [{"name": "p", "url": "unix:///tmp/p.sock/v1/policy"}]}
    handler = ConfiguredHandler(parse(hooks), BridgeMetrics(), from_file=True)
    await handler.configure(_runtime(CONF_D))
    assert isinstance(handler.inner, WebhookHandler)  # still the file's webhooks
    await handler.aclose()
    # Without --config the same string replaces the defaults.
    handler = ConfiguredHandler(parse({}), BridgeMetrics(), from_file=False)
    await handler.configure(_runtime(CONF_D))
    assert isinstance(handler.inner, StaticHandler)
    assert handler.inner.settings.adjust is not None
    assert handler.inner.settings.adjust.env[0].key == "FROM_CONF_D"
    # An empty string (every external plugin gets one) changes nothing.
    handler = ConfiguredHandler(parse(hooks), BridgeMetrics(), from_file=False)
    await handler.configure(_runtime(""))
    assert isinstance(handler.inner, WebhookHandler)
    await handler.aclose()
