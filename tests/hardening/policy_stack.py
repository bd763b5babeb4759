"""Runtime simulator -> in-process bridge (PluginRunner + WebhookHandler) -> a RawPolicy.

Two webhooks point at the same policy server and differ only in their failure
policy and the namespace they select: `lenient` (Ignore, namespace `default`)
and `strict` (Fail, namespace `strict`). One event per namespace shows both
policies against the same hostile reply. Their circuit breakers never open
here (threshold 1000), so every event really reaches the server.

On leaving, the stack checks what must hold after any policy reply: the
runtime never closed or lost the plugin, the core never had to answer for a
late handler, and no handler raised anything unexpected.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from bridge.logs import JsonFormatter
from bridge.nri.events import EVENTS_BY_RPC
from bridge.simulator import EventResult, SimulatedRuntime
from bridge.webhooks.config import WebhookSpec, parse_webhooks
from tests.hardening.policy_http import Behaviour, RawPolicy
from tests.integration.harness import Bridge, pod_and_container, running_bridge

REQUEST_TIMEOUT_S = 1.0  # the runtime's plugin request timeout
WEBHOOK_TIMEOUT_S = 0.4
LENIENT, STRICT = "lenient", "strict"
NAMESPACES = {LENIENT: "default", STRICT: "strict"}
EVENTS = ("CreateContainer", "StartContainer")


def specs(url: str, **hook: Any) -> tuple[WebhookSpec, ...]:
    common = {"url": url, "events": list(EVENTS), "timeout": f"{WEBHOOK_TIMEOUT_S}s",
              "circuit_breaker": {"failure_threshold": 1000}, **hook}
    return parse_webhooks([
        {"name": LENIENT, "failure_policy": "Ignore", "namespaces": [NAMESPACES[LENIENT]],
         **common},
        {"name": STRICT, "failure_policy": "Fail", "namespaces": [NAMESPACES[STRICT]], **common},
    ])


@dataclass
class Stack:
    runtime: SimulatedRuntime
    bridge: Bridge
    policy: RawPolicy
    serial: int = 0

    async def run(self, webhook: str, event: str = "CreateContainer") -> EventResult:
        """One event for a fresh container in the namespace `webhook` selects."""
        self.serial += 1
        pod, container = pod_and_container(f"c{self.serial}", NAMESPACES[webhook])
        return await self.runtime.run_event(EVENTS_BY_RPC[event], pod, container)

    def samples(self) -> dict[str, float]:
        """The bridge's metrics, keyed `name{label=value,...}` (labels sorted)."""
        out: dict[str, float] = {}
        for family in text_string_to_metric_families(self.bridge.metrics.exposition().decode()):
            for sample in family.samples:
                labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
                out[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
        return out

    def count(self, metric: str, webhook: str, event: str = "CreateContainer",
              **labels: str) -> float:
        every = {"event": event, "webhook": webhook, **labels}
        key = ",".join(f"{k}={v}" for k, v in sorted(every.items()))
        return self.samples().get(f"nri_webhook_bridge_{metric}{{{key}}}", 0.0)


@contextlib.asynccontextmanager
async def stack(workdir: Path, behaviour: Behaviour, *, tcp: bool = False,
                scheme: str = "http", policy: RawPolicy | None = None,
                **hook: Any) -> AsyncIterator[Stack]:
    """Serve `behaviour` (Unix socket, or loopback TCP), and a bridge calling it."""
    server = policy or RawPolicy(behaviour)
    if tcp:
        port = await server.start_tcp()
        url = f"{scheme}://127.0.0.1:{port}/v1/policy"
    else:
        await server.start_unix(workdir / "policy.sock")
        url = f"unix://{workdir}/policy.sock/v1/policy"
    runtime = SimulatedRuntime(workdir / "nri.sock", "containerd-2.1.9",
                               request_timeout_s=REQUEST_TIMEOUT_S)
    try:
        hooks = specs(url, **hook)
        await runtime.start()
        async with running_bridge(runtime, hooks, workdir) as bridge:
            yield Stack(runtime, bridge, server)
            session = bridge.runner.session
            assert session is not None and bridge.runner.ready
            assert session.service.stats.deadline_misses == 0
            assert session.service.stats.handler_errors == 0
            assert runtime.closed_plugins == [] and runtime.lost_plugins == []
    finally:
        await runtime.stop()
        await server.aclose()


def json_lines(records: Sequence[logging.LogRecord]) -> list[str]:
    """The bridge's records as `--log-format json` would write them (simulator excluded)."""
    formatter = JsonFormatter()
    return [formatter.format(r) for r in records
            if r.name.startswith("bridge.") and not r.name.startswith("bridge.simulator")]


def failure_lines(records: Sequence[logging.LogRecord], webhook: str,
                  ) -> list[logging.LogRecord]:
    return [r for r in records if r.getMessage() == "webhook call failed"
            and getattr(r, "webhook", None) == webhook]
