"""Prometheus metrics of the bridge, in one registry per bridge instance.

Names follow containerd's `containerd_nri_plugin_*` style with our own prefix:

| metric | labels | meaning |
|---|---|---|
| nri_webhook_bridge_events_total | event | events the handler processed |
| nri_webhook_bridge_event_duration_seconds | event | handler time per event (all webhooks) |
| nri_webhook_bridge_webhook_requests_total | event, webhook, outcome | webhook calls by outcome |
| nri_webhook_bridge_webhook_request_duration_seconds | event, webhook | latency of webhook calls |
| nri_webhook_bridge_webhook_timeouts_total | event, webhook | calls that ran out of budget |
| nri_webhook_bridge_webhook_fail_open_total | event, webhook | failures dropped under Ignore |
| nri_webhook_bridge_webhook_rejections_total | event, webhook | operations failed: reject or Fail |
| nri_webhook_bridge_webhook_conflicts_total | event, webhook | contributions refused as conflicts |
| nri_webhook_bridge_dropped_fields_total | event, webhook, field | fields not applied (dropped) |
| nri_webhook_bridge_webhook_circuit_state | webhook | 0 closed, 1 open, 2 half-open |
| nri_webhook_bridge_webhook_retries_total | webhook | requests re-sent after the keep-alive race |
| nri_webhook_bridge_connected | | 1 while registered and serving |
| nri_webhook_bridge_reconnects_total | | connection losses followed by a reconnect |
| nri_webhook_bridge_deadline_misses_total | | events the core answered for a late handler |
| nri_webhook_bridge_in_flight_events | | runtime requests being handled right now |
| nri_webhook_bridge_asyncio_tasks | | tasks alive in the event loop (a leak shows as growth) |
| nri_webhook_bridge_unsolicited_updates_total | result | container updates from POST /v1/updates |
| nri_webhook_bridge_runtime_calls_stuck | call | our calls to the runtime open past the threshold |
| nri_webhook_bridge_runtime_calls_became_stuck_total | call | calls of ours that got stuck |

State that lives elsewhere (circuits, the runner, the call watch) is read at scrape time
through callables, so the hot path pays nothing for it. This module imports
no other bridge module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

PREFIX = "nri_webhook_bridge"
LATENCY_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                     2.5, 5.0, 10.0)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class _Sources(Collector):
    def __init__(self) -> None:
        self.circuits: dict[str, Callable[[], int]] = {}
        self.retries: dict[str, Callable[[], int]] = {}
        self.connected: Callable[[], bool] = lambda: False
        self.reconnects: Callable[[], int] = lambda: 0
        self.deadline_misses: Callable[[], int] = lambda: 0
        self.in_flight: Callable[[], int] = lambda: 0
        self.tasks: Callable[[], int] = lambda: 0
        self.calls_stuck: Callable[[], Mapping[str, int]] = dict
        self.calls_became_stuck: Callable[[], Mapping[str, int]] = dict

    def collect(self) -> Iterator[Metric]:
        circuit = GaugeMetricFamily(f"{PREFIX}_webhook_circuit_state",
                                    "Circuit breaker state: 0 closed, 1 open, 2 half-open",
                                    labels=["webhook"])
        for name, state in sorted(self.circuits.items()):
            circuit.add_metric([name], state())
        yield circuit
        retries = CounterMetricFamily(f"{PREFIX}_webhook_retries", "Requests sent again on a "
                                      "new connection because the policy closed a kept-alive "
                                      "one before any byte of a reply", labels=["webhook"])
        for name, count in sorted(self.retries.items()):
            retries.add_metric([name], count())
        yield retries
        yield GaugeMetricFamily(f"{PREFIX}_connected", "1 while registered with the runtime "
                                "and serving", value=1 if self.connected() else 0)
        yield CounterMetricFamily(f"{PREFIX}_reconnects", "Connection losses followed by a "
                                  "reconnect attempt", value=self.reconnects())
        yield CounterMetricFamily(f"{PREFIX}_deadline_misses", "Events answered by the core "
                                  "because the handler overran its deadline",
                                  value=self.deadline_misses())
        yield GaugeMetricFamily(f"{PREFIX}_in_flight_events", "Runtime requests being handled "
                                "right now", value=self.in_flight())
        yield GaugeMetricFamily(f"{PREFIX}_asyncio_tasks", "Tasks alive in the event loop",
                                value=self.tasks())
        stuck = GaugeMetricFamily(f"{PREFIX}_runtime_calls_stuck", "Calls of ours to the "
                                  "runtime open longer than the stuck threshold (a runtime "
                                  "deadlock if it lasts)", labels=["call"])
        for call, open_calls in sorted(self.calls_stuck().items()):
            stuck.add_metric([call], open_calls)
        yield stuck
        became = CounterMetricFamily(f"{PREFIX}_runtime_calls_became_stuck", "Calls of ours "
                                     "to the runtime that stayed open past the stuck threshold",
                                     labels=["call"])
        for call, total in sorted(self.calls_became_stuck().items()):
            became.add_metric([call], total)
        yield became


class BridgeMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        ew = ["event", "webhook"]
        self.events = Counter(f"{PREFIX}_events", "Events processed by the webhook handler",
                              ["event"], registry=r)
        self.event_duration = Histogram(f"{PREFIX}_event_duration_seconds",
                                        "Handler time per event, all webhooks included",
                                        ["event"], buckets=LATENCY_BUCKETS_S, registry=r)
        self.requests = Counter(f"{PREFIX}_webhook_requests", "Webhook calls by outcome",
                                [*ew, "outcome"], registry=r)
        self.duration = Histogram(f"{PREFIX}_webhook_request_duration_seconds",
                                  "Latency of webhook calls", ew, buckets=LATENCY_BUCKETS_S,
                                  registry=r)
        self.timeouts = Counter(f"{PREFIX}_webhook_timeouts", "Webhook calls that ran out of "
                                "budget", ew, registry=r)
        self.fail_open = Counter(f"{PREFIX}_webhook_fail_open", "Webhook failures dropped "
                                 "under failure_policy Ignore", ew, registry=r)
        self.rejections = Counter(f"{PREFIX}_webhook_rejections", "Operations failed because "
                                  "of a webhook (reject, or a failure under Fail)", ew,
                                  registry=r)
        self.conflicts = Counter(f"{PREFIX}_webhook_conflicts", "Webhook contributions "
                                 "refused because an earlier webhook set the same field", ew,
                                 registry=r)
        self.dropped_fields = Counter(f"{PREFIX}_dropped_fields", "Fields a policy set that "
                                      "the runtime's NRI version does not apply or would "
                                      "crash on",
                                      [*ew, "field"], registry=r)
        self.unsolicited = Counter(f"{PREFIX}_unsolicited_updates", "Container updates "
                                   "received on POST /v1/updates", ["result"], registry=r)
        self.sources = _Sources()
        r.register(self.sources)

    def add_circuit(self, webhook: str, state: Callable[[], int]) -> None:
        self.sources.circuits[webhook] = state

    def add_retries(self, webhook: str, count: Callable[[], int]) -> None:
        self.sources.retries[webhook] = count

    def watch_runner(self, connected: Callable[[], bool], reconnects: Callable[[], int],
                     deadline_misses: Callable[[], int]) -> None:
        self.sources.connected = connected
        self.sources.reconnects = reconnects
        self.sources.deadline_misses = deadline_misses

    def watch_loop(self, in_flight: Callable[[], int], tasks: Callable[[], int]) -> None:
        self.sources.in_flight = in_flight
        self.sources.tasks = tasks

    def watch_calls(self, stuck: Callable[[], Mapping[str, int]],
                    became_stuck: Callable[[], Mapping[str, int]]) -> None:
        """Calls stuck now and calls that became stuck, by call name (bridge.call_watch)."""
        self.sources.calls_stuck = stuck
        self.sources.calls_became_stuck = became_stuck

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
