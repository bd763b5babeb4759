"""deploy/prometheus's alerting rules: valid, tested by promtool, and on metrics that exist.

`promtool check rules` and `promtool test rules` (Debian's prometheus package, fetched by
`make tools`: tests/deploy/setup/fetch-promtool.sh) run on the shipped files; a missing
promtool fails these tests. The cases must be able to fail: every alert has a case where it
fires and one where it does not, and an alert changed to never fire fails its cases. Every
metric and label the rules select is one a real bridge registry exports, so a renamed metric
breaks the build.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.parser import text_string_to_metric_families

from bridge.app import watch_runner
from bridge.metrics import BridgeMetrics
from bridge.nri.session import PluginIdentity
from bridge.nri.stub import new_plugin
from bridge.webhooks.specs import parse_webhooks
from bridge.webhooks.webhook_handler import WebhookHandler
from tests.deploy import dashboard as g
from tests.deploy.support import DEPLOY, REPO

pytestmark = pytest.mark.processes  # starts processes: not in make check

RULES_DIR = DEPLOY / "prometheus"
RULES = RULES_DIR / "nri-webhook-bridge-rules.yaml"
CASES = sorted((RULES_DIR / "tests").glob("*.yaml"))
FETCHED = REPO / "tests" / "deploy" / ".build" / "root" / "usr" / "bin" / "promtool"
# Labels Prometheus adds to every scraped series.
TARGET_LABELS = frozenset({"instance", "job"})
# The suffixes of a family's samples, by type (the text format's names).
SUFFIXES = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count")}


def promtool() -> str:
    found = os.environ.get("PROMTOOL") or (str(FETCHED) if FETCHED.exists() else None) or (
        shutil.which("promtool"))
    if found is None:
        pytest.fail("promtool is missing: run `make tools` (tests/deploy/setup/fetch-promtool.sh"
                    " unpacks Debian's prometheus package), or set PROMTOOL")
    return found


def run_promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, check=False)


def rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    return [rule for group in doc["groups"] for rule in group["rules"]]


def test_the_rules_are_valid() -> None:
    done = run_promtool("check", "rules", str(RULES), cwd=RULES_DIR)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(rules())} rules found" in done.stdout


def test_the_rule_tests_pass() -> None:
    assert CASES, "deploy/prometheus/tests has no test file"
    done = run_promtool("test", "rules", *map(str, CASES), cwd=RULES_DIR)
    assert done.returncode == 0, done.stdout + done.stderr


def _expectations() -> Iterator[tuple[str, bool]]:
    """(alert, fires) for every alert_rule_test entry of the cases."""
    for path in CASES:
        for case in yaml.safe_load(path.read_text(encoding="utf-8"))["tests"]:
            for check in case.get("alert_rule_test", []):
                yield check["alertname"], bool(check["exp_alerts"])


def test_every_alert_has_a_case_that_fires_and_one_that_does_not() -> None:
    alerts = {rule["alert"] for rule in rules()}
    expected = set(_expectations())
    assert {name for name, _ in expected} == alerts
    missing = [(name, fires) for name in sorted(alerts) for fires in (True, False)
               if (name, fires) not in expected]
    assert not missing, f"alerts without a case where they (do not) fire: {missing}"


@pytest.mark.parametrize("alert", [rule["alert"] for rule in rules()])
def test_an_alert_that_never_fires_fails_its_cases(alert: str, tmp_path: Path) -> None:
    doc = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    for group in doc["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") == alert:
                rule["expr"] = "vector(1) < 0"
    (tmp_path / RULES.name).write_text(yaml.safe_dump(doc), encoding="utf-8")
    (tmp_path / "tests").mkdir()
    for path in CASES:
        shutil.copy(path, tmp_path / "tests" / path.name)
    done = run_promtool("test", "rules", *(f"tests/{p.name}" for p in CASES), cwd=tmp_path)
    assert done.returncode != 0, done.stdout + done.stderr
    assert f"alertname: {alert}," in done.stdout + done.stderr


def _declared_labels(metrics: BridgeMetrics) -> dict[str, frozenset[str]]:
    return {w._name: frozenset(w._labelnames) for w in vars(metrics).values()
            if isinstance(w, MetricWrapperBase)}


@pytest.fixture(scope="module")
def exported() -> dict[str, frozenset[str]]:
    """Sample name -> label names, from a real bridge registry: a runner (its call watch and
    connection state) and a webhook (its circuit) wired as bridge.app wires them."""
    metrics = BridgeMetrics()
    handler = WebhookHandler(parse_webhooks([{"name": "p", "url": "unix:///run/p.sock/v1/policy"}]),
                             metrics, knows_container=lambda _: True)
    watch_runner(metrics, new_plugin(PluginIdentity("webhook-bridge", "50"), handler))
    declared = _declared_labels(metrics)
    names: dict[str, frozenset[str]] = {}
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        labels = set(declared.get(family.name, ()))
        for sample in family.samples:
            labels.update(sample.labels)
        for suffix in SUFFIXES[family.type]:
            names[family.name + suffix] = frozenset(labels)
    return names


def test_every_metric_and_label_the_rules_use_is_exported(
        exported: dict[str, frozenset[str]]) -> None:
    for rule in rules():
        query = g.parse(rule["alert"], rule["expr"])
        assert query.selectors, rule["alert"]
        for sel in query.selectors:
            assert sel.metric in exported, f"{rule['alert']}: the bridge exports no {sel.metric}"
            have = exported[sel.metric] | TARGET_LABELS
            unknown = {name for name, _, _ in sel.matchers} - have
            assert not unknown, f"{rule['alert']}: {sel.metric} has no label {unknown}"
        used = {m for sel in query.selectors for m in exported[sel.metric]} | TARGET_LABELS
        assert query.by_labels <= used, f"{rule['alert']}: `by` {query.by_labels - used}"
