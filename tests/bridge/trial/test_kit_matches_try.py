"""The kit's `send_pod` and `nri-webhook-bridge try` agree: same request bodies (envelope ids,
budgets and dry_run aside), same replies, same effective values, for the same manifests and
events."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from policy_server.testing import NodeSpec, PolicyRunner

from .conftest import REJECTING_POLICY, REPO, run_try

pytestmark = pytest.mark.processes  # starts processes: not in make check

EVENTS = ["RunPodSandbox", "CreateContainer", "StartContainer", "StopContainer",
          "RemoveContainer", "StopPodSandbox"]
MANIFESTS = [str(REPO / "examples" / "pods" / "web-deployment.yaml"),
             str(REPO / "examples" / "pods" / "lsr-pod.yaml"),
             str(REPO / "tests" / "bridge" / "kube" / "manifests" / "kubectl-get-list.yaml")]
LATEST_POD = """\
kind: Pod
metadata: {name: risky, namespace: dev}
spec:
  initContainers: [{name: setup, image: "tools:latest"}]
  containers: [{name: app, image: "app:1.0"}]
"""


def payload(body: dict[str, Any]) -> dict[str, Any]:
    # The envelope's uid and budget differ; so does dry_run: try sends every request as a dry
    # run (a live server must not change), the kit's private engine needs none.
    return {k: v for k, v in body.items() if k not in ("uid", "budget_ms", "dry_run")}


@pytest.mark.parametrize("policy", ["label-env", "no-latest"])
def test_send_pod_matches_try(tmp_path: Path, policy_socket: Path, policy: str) -> None:
    if policy == "label-env":
        runner = PolicyRunner.from_module(REPO / "examples" / "label_env_policy.py")
    else:
        module = tmp_path / "no_latest.py"
        module.write_text(REJECTING_POLICY)
        runner = PolicyRunner.from_module(module)
    latest = tmp_path / "latest.yaml"
    latest.write_text(LATEST_POD)
    manifests = [*MANIFESTS, str(latest)]
    config = tmp_path / "bridge.yaml"
    config.write_text(json.dumps({"webhooks": [{
        "name": policy, "url": f"unix://{policy_socket}/v1/policies/{policy}",
        "events": EVENTS, "timeout": "1s"}]}))
    done = run_try(*manifests, "--config", str(config), "--output", "json",
                   "--cgroup-driver", "systemd", "--node-memory", "8Gi")
    assert done.returncode == (1 if policy == "no-latest" else 0), done.stderr
    tried = json.loads(done.stdout)
    kit = runner.send_pod(*manifests, events=EVENTS,
                          node=NodeSpec(cgroup_driver="systemd", memory_bytes=8 << 30))
    assert [(o["pod"], o["container"]) for o in tried] == [(c.pod, c.container) for c in kit]
    for t, k in zip(tried, kit, strict=True):
        where = f"{k.pod}/{k.container}"
        assert sorted(t["requests"]) == sorted(k.requests), where  # JSON keys are sorted
        for event, body in t["requests"].items():
            assert payload(body) == payload(k.requests[event]), f"{where} {event}"
        assert t["adjust"] == ({policy: k.adjust} if k.adjust else {}), where
        assert [w["message"] for w in t["warnings"] if w["webhook"]] == \
            [w["message"] for w in k.warnings], where
        assert (t["reject"] or {}).get("reason") == (k.reject or {}).get("reason"), where
        assert t["effective"] == k.effective, where
        assert [n["message"] for n in t["runtime"]] == [n["message"] for n in k.runtime], where
    assert any(k.reject for k in kit) == (policy == "no-latest")
