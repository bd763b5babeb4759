"""Prometheus metrics of one server instance (its own registry, so tests can build many)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

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
        self.reconcile_seconds = Histogram(
            "policy_reconcile_pass_seconds",
            "Wall time of one node reconciler pass (fetch, evaluate, push, node writes)",
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
            registry=r,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
