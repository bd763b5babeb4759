"""Reading deploy/grafana's dashboard: its panels and what their PromQL selects.

Owns: walking the dashboard's panels, substituting Grafana's built-in interval
variables so a query is plain PromQL, parsing it with a real PromQL parser
(promql-parser: a syntax error fails the test), and listing its vector selectors
and aggregation labels.

Must not: know which metrics exist; the tests take those from a real scrape.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import promql_parser as promql

from tests.deploy.support import DEPLOY

DASHBOARD = DEPLOY / "grafana" / "nri-webhook-bridge.json"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
# Grafana replaces these before Prometheus sees the query; any valid duration will do.
_INTERVALS = re.compile(r"\$__(rate_interval|interval|range)\b|\$\{__(rate_interval|interval|"
                        r"range)\}")


@dataclass(frozen=True)
class Selector:
    metric: str
    # (label, operator, value) of each matcher, operator as PromQL writes it.
    matchers: tuple[tuple[str, str, str], ...]


@dataclass(frozen=True)
class Query:
    panel: str
    expr: str
    selectors: tuple[Selector, ...]
    by_labels: frozenset[str]


_OPS = ((promql.MatchOp.Equal, "="), (promql.MatchOp.NotEqual, "!="), (promql.MatchOp.Re, "=~"),
        (promql.MatchOp.NotRe, "!~"))  # MatchOp is not hashable


def _op(op: Any) -> str:
    return next(text for known, text in _OPS if op == known)


def load() -> dict[str, Any]:
    doc = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    return doc


def panels(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, those inside collapsed rows included; rows themselves excluded."""
    for panel in doc["panels"]:
        if panel["type"] == "row":
            yield from panel.get("panels", [])
        else:
            yield panel


def parse(panel: str, expr: str) -> Query:
    try:
        tree = promql.parse(_INTERVALS.sub("5m", expr))
    except ValueError as exc:
        raise AssertionError(f"panel {panel!r}: not PromQL: {expr}\n{exc}") from None
    selectors: list[Selector] = []
    by: set[str] = set()

    def visit(node: Any) -> bool:
        if isinstance(node, promql.VectorSelector):
            assert node.name, f"panel {panel!r}: a selector without a metric name: {expr}"
            selectors.append(Selector(node.name, tuple(
                (m.name, _op(m.op), m.value) for m in node.matchers.matchers)))
        elif isinstance(node, promql.AggregateExpr) and node.modifier is not None:
            assert node.modifier.type == promql.AggModifierType.By, (
                f"panel {panel!r}: aggregate with `by`, not `without`: {expr}")
            by.update(node.modifier.labels)
        return True

    promql.walk(tree, visit)
    return Query(panel, expr, tuple(selectors), frozenset(by))


def queries(doc: dict[str, Any]) -> list[Query]:
    return [parse(p["title"], t["expr"]) for p in panels(doc) for t in p["targets"]]
