"""The ``cel`` policy where any policy works: ``try`` with ``--policy cel=FILE``, and a
shadow-mode (``dry_run``) request answered as the real one. (Suites naming CEL files run with
the other examples: tests/bridge/suite/test_suite_command.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from policy_server.testing import PolicyRunner

REPO = Path(__file__).resolve().parents[3]
MEMORY_LIMIT = REPO / "examples" / "policies" / "cel" / "memory-limit.yaml"
REQUEST = REPO / "schemas" / "webhook" / "examples" / "CreateContainer.request.json"
PODS = """\
apiVersion: v1
kind: Pod
metadata: {name: unlimited, namespace: shop}
spec:
  containers:
    - {name: app, image: busybox:1.36}
---
apiVersion: v1
kind: Pod
metadata: {name: limited, namespace: shop}
spec:
  containers:
    - name: app
      image: busybox:1.36
      resources: {limits: {memory: 64Mi}}
"""


@pytest.mark.processes
@pytest.mark.timeout(300)
def test_try_runs_a_cel_file(tmp_path: Path) -> None:
    pods = tmp_path / "pods.yaml"
    pods.write_text(PODS)
    done = subprocess.run(
        [sys.executable, "-m", "bridge", "try", str(pods), "--policy", f"cel={MEMORY_LIMIT}",
         "--output", "json"],
        capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1, done.stderr  # a pod was refused
    outcome = {o["pod"]: o for o in json.loads(done.stdout)}
    assert "container app has no memory limit" in outcome["shop/unlimited"]["reject"]["reason"]
    assert outcome["shop/limited"]["reject"] is None


def test_a_shadow_request_is_answered_as_the_real_one() -> None:
    runner = PolicyRunner.builtin("cel", MEMORY_LIMIT)
    body = json.loads(REQUEST.read_text())
    real = runner.send(body).json
    assert real == {"warnings": ["memory-limit/memory-limit: 67108864"]}
    assert runner.send({**body, "dry_run": True}).json == real
