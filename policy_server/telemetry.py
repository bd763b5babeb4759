"""Prometheus metrics of one server instance (its own registry, so tests can build many).

Besides the server's own metrics, the counters policies export through the SDK's
``Policy.counters`` (``PolicyCounters``, read at each scrape)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import CounterMetricFamily, Metric

# Decisions take tens of microseconds; the buckets reach up to a slow second.
_LATENCY_BUCKETS_S = (
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.1,
    1.0,
)

CONTENT_TYPE = CONTENT_TYPE_LATEST


class CounterReading(Protocol):
    """The SDK's ``CounterSample`` as read here (telemetry sits below the SDK)."""

    @property
    def name(self) -> str: ...
    @property
    def documentation(self) -> str: ...
    @property
    def labels(self) -> tuple[tuple[str, str], ...]: ...
    @property
    def value(self) -> float: ...


class PolicyCounters:
    """A collector of policies' own counters: ``samples()`` yields (policy, sample) pairs,
    exported as ``policy_<policy>_<name>_total`` (a policy's names cannot clash with ours)."""

    def __init__(self, samples: Callable[[], Iterable[tuple[str, CounterReading]]]) -> None:
        self._samples = samples

    def collect(self) -> Iterator[Metric]:
        families: dict[str, CounterMetricFamily] = {}
        for policy, sample in self._samples():
            name = f"policy_{policy}_{sample.name}".replace("-", "_")
            family = families.get(name)
            if family is None:
                labels = [label for label, _ in sample.labels]
                family = families[name] = CounterMetricFamily(name, sample.documentation,
                                                              labels=labels)
            family.add_metric([value for _, value in sample.labels], sample.value)
        yield from families.values()


class Metrics:
    """Every metric the server exports."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "policy_requests",
            "Webhook requests by policy, event and outcome (ok, rejected, invalid, error)",
            ("policy", "event", "outcome"),
            registry=r,
        )
        self.decision_seconds = Histogram(
            "policy_decision_seconds",
            "Time to evaluate one event (handlers + merge)",
            ("policy", "event"),
            buckets=_LATENCY_BUCKETS_S,
            registry=r,
        )
        self.handler_failures = Counter(
            "policy_handler_failures",
            "Handler errors (PolicyError or crash)",
            ("policy", "handler"),
            registry=r,
        )
        self.conflicts = Counter(
            "policy_conflicts", "Fields set by two handlers of one policy", ("policy",), registry=r
        )
        self.rules_reloads = Counter(
            "policy_rules_reloads",
            "Rules file polls that changed something or failed",
            ("result",),
            registry=r,
        )
        self.rules_generation = Gauge(
            "policy_rules_generation",
            "Generation of the rules in force (1 = initial file)",
            registry=r,
        )
        self.rules_valid = Gauge(
            "policy_rules_last_load_valid", "1 if the last rules file version was valid", registry=r
        )
        self.resyncs = Counter(
            "policy_resyncs",
            "Recomputations for all known containers after a rule change",
            ("result",),
            registry=r,
        )
        self.pushed_updates = Counter(
            "policy_pushed_updates", "Container updates pushed to the bridge", registry=r
        )
        self.cgroup_writes = Counter(
            "policy_pod_cgroup_writes",
            "Pod-level side effects by result (written, logged, skipped, failed)",
            ("result",),
            registry=r,
        )
        self.unit_properties = Counter(
            "policy_systemd_unit_property_calls",
            "SetUnitProperties calls on pod slices (systemd cgroup driver) by result (ok, "
            "failed: the files were written directly)",
            ("result",),
            registry=r,
        )
        self.drift_found = Counter(
            "policy_reconcile_drift_found",
            "Values the reconciler found differing from the decision, by level (container, "
            "pod, qos, resctrl, oom, coresched, sysctl)",
            ("level",),
            registry=r,
        )
        self.drift_fixed = Counter(
            "policy_reconcile_drift_fixed",
            "Differences the reconciler corrected, by level",
            ("level",),
            registry=r,
        )
        self.container_failures = Counter(
            "policy_reconcile_container_failures",
            "Containers (and pods) a resync or reconciler pass skipped, by pass (resync, "
            "reconcile) and reason (refused: a field the request decoder refuses; unreadable: "
            "its cgroup files could not be read)",
            ("pass", "reason"),
            registry=r,
        )
        self.reconcile_seconds = Histogram(
            "policy_reconcile_pass_seconds",
            "Wall time of one node reconciler pass (fetch, evaluate, push, node writes)",
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
            registry=r,
        )

    def export_policy_counters(
        self, samples: Callable[[], Iterable[tuple[str, CounterReading]]]
    ) -> None:
        self.registry.register(PolicyCounters(samples))

    def render(self) -> bytes:
        return generate_latest(self.registry)
