"""deploy/grafana's dashboard queries what the two programs really export.

The metric names, types and label names come from the shipped pod itself: the
base DaemonSet's bridge and policy server run as processes (as in
test_deployments_run), serve the koordinator scenario, and their metrics
listeners are scraped over TCP. Label names of families that had no sample in
that run come from the same registries, built in-process.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.metrics import MetricWrapperBase

from bridge.metrics import BridgeMetrics
from bridge.webhooks.failures import FailureKind
from policy_server.telemetry import Metrics as PolicyMetrics
from tests.deploy import dashboard as g
from tests.deploy import support as s
from tests.deploy.test_deployments_run import Samples, kubernetes, root, serving

pytestmark = pytest.mark.processes  # starts processes: not in make check

__all__ = ["root"]  # the fixture, imported for this module's tests

# Labels Prometheus adds to every scraped series (instance, job) and the bucket bound.
TARGET_LABELS = frozenset({"instance", "job"})
FAILURES_PANEL = "Webhook failures by kind"


def _wrappers(metrics: Any) -> Iterator[MetricWrapperBase]:
    yield from (v for v in vars(metrics).values() if isinstance(v, MetricWrapperBase))


def _declared_labels(metrics: Any) -> dict[str, frozenset[str]]:
    """family name -> label names, for the metrics a program's registry declares."""
    return {w._name: frozenset(w._labelnames) for w in _wrappers(metrics)}


class Exported:
    """Sample names (with the labels seen or declared) of both programs' scrapes."""

    def __init__(self, scrapes: dict[str, Samples], declared: dict[str, frozenset[str]]) -> None:
        self.families: dict[str, str] = {}  # sample name -> family
        self.labels: dict[str, set[str]] = {}  # sample name -> label names
        self.outcomes: set[str] = set()
        for samples_by_family in scrapes.values():
            for family, samples in samples_by_family.items():
                if family.removesuffix("_created") in samples_by_family.keys() - {family}:
                    continue  # the text format's creation timestamps of counters/histograms
                for name in _sample_names(family, samples):
                    self.families[name] = family
                    self.labels.setdefault(name, set()).update(declared.get(family, ()))
                for name, labels, _ in samples:
                    self.labels.setdefault(name, set()).update(labels)
                    if family == "nri_webhook_bridge_webhook_requests":
                        self.outcomes.add(labels["outcome"])


def _sample_names(family: str, samples: list[tuple[str, dict[str, str], float]]) -> set[str]:
    names = {name for name, _, _ in samples}
    return names or {family, f"{family}_total", f"{family}_bucket", f"{family}_sum",
                     f"{family}_count"}


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Exported:
    import asyncio

    async def run(directory: Path) -> dict[str, Samples]:
        async with serving(kubernetes(directory, s.BASE), directory) as served:
            return served.metrics

    directory = Path(tmp_path_factory.mktemp("nwb"))
    scrapes = asyncio.run(run(directory))
    assert set(scrapes) == {s.BRIDGE, s.POLICY_SERVER}
    declared = {**_declared_labels(BridgeMetrics()), **_declared_labels(PolicyMetrics())}
    return Exported(scrapes, declared)


def test_dashboard_is_importable_grafana_json() -> None:
    doc = g.load()
    assert doc["uid"] and doc["title"] and doc["schemaVersion"] >= 36
    [var] = [v for v in doc["templating"]["list"] if v["type"] == "datasource"]
    assert var["name"] == "datasource" and var["query"] == "prometheus"
    panels = list(g.panels(doc))
    assert len(panels) >= 10
    ids = [p["id"] for p in doc["panels"]] + [p["id"] for p in panels if p not in doc["panels"]]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    for p in panels:
        assert p["datasource"] == g.DATASOURCE, p["title"]
        assert p["targets"], f"{p['title']} has no query"
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs)), p["title"]
        assert all(t["datasource"] == g.DATASOURCE for t in p["targets"]), p["title"]
        box = p["gridPos"]
        assert box["x"] + box["w"] <= 24 and box["w"] > 0 and box["h"] > 0, p["title"]
    # Grafana's grid is 24 columns wide; panels (rows included) must not overlap.
    cells: dict[tuple[int, int], str] = {}
    for p in doc["panels"]:
        box = p["gridPos"]
        for x in range(box["x"], box["x"] + box["w"]):
            for y in range(box["y"], box["y"] + box["h"]):
                assert (x, y) not in cells, f"{p['title']} overlaps {cells[(x, y)]}"
                cells[(x, y)] = p["title"]


def test_every_query_is_promql_with_a_metric(exported: Exported) -> None:
    queries = g.queries(g.load())
    assert all(q.selectors for q in queries)


def test_every_panel_metric_is_exported(exported: Exported) -> None:
    missing = [(q.panel, sel.metric) for q in g.queries(g.load()) for sel in q.selectors
               if sel.metric not in exported.families]
    assert not missing, f"panels query metrics neither program exports: {missing}"


def test_every_label_a_panel_uses_exists_on_its_metric(exported: Exported) -> None:
    for q in g.queries(g.load()):
        labels = set(TARGET_LABELS)
        for sel in q.selectors:
            have = exported.labels[sel.metric] | TARGET_LABELS
            unknown = {name for name, _, _ in sel.matchers} - have
            assert not unknown, f"{q.panel}: {sel.metric} has no label {unknown}"
            labels |= have
        assert q.by_labels <= labels, f"{q.panel}: `by` {q.by_labels - labels}: {q.expr}"


def test_every_exported_family_has_a_panel(exported: Exported) -> None:
    used = {exported.families[sel.metric] for q in g.queries(g.load()) for sel in q.selectors}
    assert used == set(exported.families.values())


def test_failures_panel_counts_every_failure_kind_and_nothing_else(exported: Exported) -> None:
    [query] = [q for q in g.queries(g.load()) if q.panel == FAILURES_PANEL]
    [sel] = query.selectors
    [(label, op, regex)] = sel.matchers
    assert (label, op) == ("outcome", "!~")

    def counted(outcome: str) -> bool:  # PromQL regexes are anchored
        return re.fullmatch(regex, outcome) is None

    assert all(counted(kind.value) for kind in FailureKind)
    # What the shipped pod answered in the scenario: successes, never counted as failures.
    successes = exported.outcomes - {kind.value for kind in FailureKind}
    assert successes and not any(counted(o) for o in successes)
    assert not counted("rejected") and not counted("shadow_ok")


def test_registry_helpers_see_every_declared_metric() -> None:
    # The label fallback reads the wrappers of a fresh registry: it must find them all.
    for metrics in (BridgeMetrics(), PolicyMetrics()):
        registry: CollectorRegistry = metrics.registry
        names = {f.name for f in registry.collect()}
        assert set(_declared_labels(metrics)) <= names
