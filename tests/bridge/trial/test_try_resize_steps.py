"""`try --resize` and a suite's `resize:` play kubelet's two steps (issue 45.2): per container
a memory UpdateContainer carrying the old CPU values, then a CPU one carrying the new memory,
and the state between them is visible to the policy and in the report; koordinator-qos's CPU
normalization answers each step (the memory step keeps the scaled quota, never scales twice)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from .conftest import run_try
from .unix_webhook import JsonWebhook, serving

pytestmark = pytest.mark.processes  # starts processes: not in make check

MI = 1 << 20
POD = """\
kind: Pod
metadata: {name: web, namespace: shop, labels: {koordinator.sh/qosClass: LS}}
spec:
  containers:
  - {name: app, image: "app:1", resources: {limits: {cpu: 700m, memory: 512Mi}}}
"""
RULES = "cpu_normalization_ratio: 1.2\nfeatures: {CPUNormalization: true}\n"


class _Recorder(JsonWebhook):
    """Records every UpdateContainer's linux_resources and the container's resources then."""

    seen: ClassVar[list[dict[str, Any]]] = []

    def reply(self, request: Any) -> Any:
        if request["event"] == "UpdateContainer":
            self.seen.append({"linux_resources": request["linux_resources"],
                              "container": request["container"]["linux"]["resources"]})
        return {}


@pytest.fixture
def recorded(tmp_path: Path) -> Iterator[Path]:
    _Recorder.seen = []
    with serving(tmp_path / "rec.sock", _Recorder) as sock:
        path = tmp_path / "bridge.yaml"
        path.write_text(json.dumps({"webhooks": [{
            "name": "rec", "url": f"unix://{sock}/v1/policies/x",
            "events": ["UpdateContainer"], "allow": ["resources"]}]}))
        yield path


def _out(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr
    (app,) = json.loads(done.stdout)
    return dict(app)


def test_kubelet_sends_memory_then_cpu_each_as_its_own_update(recorded: Path,
                                                              tmp_path: Path) -> None:
    (tmp_path / "pod.yaml").write_text(POD)
    app = _out(run_try(str(tmp_path / "pod.yaml"), "--config", str(recorded), "--output",
                       "json", "--resize", "app=cpu:1500m,memory:1Gi"))
    memory, cpu = _Recorder.seen  # two events, not one with both
    assert memory["linux_resources"]["memory"]["limit"] == 1024 * MI
    assert memory["linux_resources"]["cpu"]["quota"] == 70_000  # the old CPU
    assert cpu["linux_resources"]["cpu"] == {"period": 100_000, "quota": 150_000,
                                             "shares": 1536}
    assert cpu["linux_resources"]["memory"]["limit"] == 1024 * MI  # the memory just set
    # The policy sees the intermediate state: at the CPU step the container has the new
    # memory and still the old quota.
    assert cpu["container"]["memory"]["limit"] == 1024 * MI
    assert cpu["container"]["cpu"]["quota"] == 70_000
    assert [s["resource"] for s in app["resize"]] == ["memory", "cpu"]
    assert app["resize"][0]["resources"]["cpu"]["quota"] == 70_000
    assert app["resize"][0]["resources"]["memory"]["limit"] == 1024 * MI


def test_a_cpu_only_resize_is_one_update_keeping_the_memory(recorded: Path,
                                                            tmp_path: Path) -> None:
    (tmp_path / "pod.yaml").write_text(POD)
    _out(run_try(str(tmp_path / "pod.yaml"), "--config", str(recorded), "--output", "json",
                 "--resize", "app=cpu:1"))
    (only,) = _Recorder.seen
    assert only["linux_resources"]["cpu"]["quota"] == 100_000
    assert only["linux_resources"]["memory"]["limit"] == 512 * MI  # kubelet's, not unset


def test_normalization_answers_each_step(tmp_path: Path) -> None:
    (tmp_path / "pod.yaml").write_text(POD)
    (tmp_path / "rules.yaml").write_text(RULES)
    app = _out(run_try(str(tmp_path / "pod.yaml"), "--rules", str(tmp_path / "rules.yaml"),
                       "--output", "json", "--resize", "app=cpu:1500m,memory:1Gi"))
    memory, cpu = app["resize"]
    # 700m scaled by 1.2 at creation (58334); the memory step carries kubelet's 70000 again
    # and is scaled once, to the same 58334, not to 48612 (scaled twice) nor left at 70000.
    assert memory["kubelet"]["cpu_quota"] == 70_000
    assert memory["resources"]["cpu"]["quota"] == 58_334
    assert memory["resources"]["memory"]["limit"] == 1024 * MI
    assert cpu["kubelet"]["cpu_quota"] == 150_000
    assert cpu["resources"]["cpu"]["quota"] == 125_000
    assert app["effective"]["resources"]["cpu"]["quota"] == 125_000


def test_a_suite_case_plays_the_two_steps(recorded: Path, tmp_path: Path) -> None:
    (tmp_path / "pod.yaml").write_text(POD)
    suite = {"webhooks": {"config": str(recorded)},
             "cases": [{"name": "two steps", "manifests": ["pod.yaml"],
                        "resize": ["app=cpu:1500m,memory:1Gi"],
                        "expect": [{"pod": "shop/web", "container": "app",
                                    "effective": {"resources.cpu.quota": 150_000,
                                                  "resources.memory.limit": 1024 * MI}}]}]}
    (tmp_path / "suite.yaml").write_text(json.dumps(suite))
    done = subprocess.run([sys.executable, "-m", "bridge", "test", "suite.yaml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [r["linux_resources"]["cpu"]["quota"] for r in _Recorder.seen] == [70_000, 150_000]
