"""Runtime simulator -> in-process bridge (PluginRunner + WebhookHandler) -> a RawPolicy.

Two webhooks point at the same policy server and differ only in their failure
policy and the namespace they select: `lenient` (Ignore, namespace `default`)
and `strict` (Fail, namespace `strict`). One event per namespace shows both
policies against the same hostile reply. Their circuit breakers never open
here (threshold 1000), so every event really reaches the server.

On leaving, the stack checks what must hold after any policy reply: the
runtime never closed or lost the plugin, the core never had to answer for a
late handler, and no handler raised anything unexpected. `check_failure`
holds what a failed call must look like under both failure policies.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from bridge.contract.catalogue import EVENTS_BY_RPC
from bridge.logs import JsonFormatter
from bridge.proto.nri import api_pb2 as api
from bridge.simulator import EventResult, SimulatedRuntime
from bridge.simulator.cri_server import serve_cri
from bridge.webhooks.specs import WebhookSpec, parse_webhooks
from tests.hardening.policy_http import Behaviour, RawPolicy
from tests.integration.harness import Bridge, pod_and_container, running_bridge

REQUEST_TIMEOUT_S = 1.0  # the runtime's plugin request timeout
WEBHOOK_TIMEOUT_S = 0.4
MAX_LOG_LINE_BYTES = 4096  # any line the bridge writes, whatever a policy replied
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
async def stack(workdir: Path, served: Behaviour | RawPolicy, *, tcp: bool = False,
                scheme: str = "http",
                hooks: Callable[[str], Sequence[WebhookSpec]] | None = None,
                seed: tuple[Sequence[api.PodSandbox], Sequence[api.Container]] = ((), ()),
                **hook: Any) -> AsyncIterator[Stack]:
    """Serve `served` (Unix socket, or loopback TCP) and a bridge calling it.

    The webhooks are `lenient` and `strict` with `hook` added to both, unless
    `hooks(url)` builds others. `seed` is what the runtime already runs: the
    bridge learns it through Synchronize.
    """
    server = served if isinstance(served, RawPolicy) else RawPolicy(served)
    if tcp:
        port = await server.start_tcp()
        url = f"{scheme}://127.0.0.1:{port}/v1/policy"
    else:
        await server.start_unix(workdir / "policy.sock")
        url = f"unix://{workdir}/policy.sock/v1/policy"
    runtime = serve_cri(SimulatedRuntime(workdir / "nri.sock", "containerd-2.1.9",
                                         request_timeout_s=REQUEST_TIMEOUT_S),
                        workdir / "cri.sock")
    runtime.state.seed(list(seed[0]), list(seed[1]))
    try:
        webhooks = hooks(url) if hooks is not None else specs(url, **hook)
        await runtime.start()
        async with running_bridge(runtime, webhooks, workdir) as bridge:
            yield Stack(runtime, bridge, server)
            session = bridge.runner.session
            assert session is not None and bridge.runner.ready
            assert session.service.stats.deadline_misses == 0
            assert session.service.stats.handler_errors == 0
            assert runtime.closed_plugins == [] and runtime.lost_plugins == []
    finally:
        await runtime.stop()
        await server.aclose()


async def both(s: Stack, event: str = "CreateContainer") -> dict[str, EventResult]:
    """The same event once per failure policy."""
    return {hook: await s.run(hook, event) for hook in (LENIENT, STRICT)}


def no_change(result: EventResult) -> None:
    assert result.ok, result.error
    assert [m.ByteSize() for _, m in result.responses if m is not None] in ([], [0])


def check_failure(s: Stack, records: Sequence[logging.LogRecord],
                  results: dict[str, EventResult], kind: str, reason: str,
                  event: str = "CreateContainer") -> None:
    """Both failure policies applied to one failure of `kind`, in time, logged and counted."""
    for result in results.values():
        assert result.latency_s < REQUEST_TIMEOUT_S, result
    no_change(results[LENIENT])
    error = results[STRICT].error
    assert error is not None and f'webhook "strict" failed ({kind}): ' in error, error
    assert reason in error, error
    for webhook, action in ((LENIENT, "ignore its contribution"), (STRICT, "fail the operation")):
        [line] = failure_lines(records, webhook)
        assert line.levelno == logging.WARNING
        assert (line.outcome, line.action) == (kind, action)  # type: ignore[attr-defined]
        assert reason in line.reason  # type: ignore[attr-defined]
        assert s.count("webhook_requests_total", webhook, event, outcome=kind) == 1
    assert s.count("webhook_fail_open_total", LENIENT, event) == 1
    assert s.count("webhook_rejections_total", STRICT, event) == 1
    if kind == "timeout":
        assert s.count("webhook_timeouts_total", STRICT, event) == 1
    check_log_lines(records)


def check_log_lines(records: Sequence[logging.LogRecord]) -> list[str]:
    """Every line the bridge wrote is short and none is an error; returns them (JSON)."""
    lines = json_lines(records)
    longest = max(lines, key=len, default="")
    assert len(longest.encode()) < MAX_LOG_LINE_BYTES, f"{len(longest.encode())}: {longest[:300]}"
    assert not [r for r in records if r.name.startswith("bridge.") and r.levelno >= logging.ERROR]
    return lines


def json_lines(records: Sequence[logging.LogRecord]) -> list[str]:
    """The bridge's records as `--log-format json` would write them (simulator excluded)."""
    formatter = JsonFormatter()
    return [formatter.format(r) for r in records
            if r.name.startswith("bridge.") and not r.name.startswith("bridge.simulator")]


def failure_lines(records: Sequence[logging.LogRecord], webhook: str,
                  ) -> list[logging.LogRecord]:
    return [r for r in records if r.getMessage() == "webhook call failed"
            and getattr(r, "webhook", None) == webhook]
