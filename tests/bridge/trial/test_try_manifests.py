"""`try` on what real bundles hold (issue 25): documents that make no pod skipped with a note
(or refused with --strict), replicas played as pods, the RuntimeClass's handler on the pod,
and options answered in one line."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from .conftest import run_try

pytestmark = pytest.mark.processes  # starts processes: not in make check

BUNDLE = """\
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec: {ports: [{port: 80}]}
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: gvisor}
handler: runsc
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 2
  template:
    spec:
      runtimeClassName: gvisor
      containers: [{name: web, image: "shop/web:2.3",
                    resources: {limits: {cpu: "2", memory: 1Gi}}}]
"""


def test_bundle_skips_other_kinds_and_plays_every_replica(policy_socket: Path) -> None:
    url = f"unix://{policy_socket}/v1/policies/no-latest"
    done = run_try("-", "--policy-url", url, "--output", "json", stdin=BUNDLE)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        "nri-webhook-bridge try: note: <stdin> document 1 (Service web): skipped, a Service "
        "makes no pod; expected one of Pod, Deployment, ReplicaSet, ReplicationController, "
        "StatefulSet, DaemonSet, Job, CronJob, List, PodList",
        "nri-webhook-bridge try: note: <stdin> document 2 (RuntimeClass gvisor): skipped, a "
        "RuntimeClass makes no pod; expected one of Pod, Deployment, ReplicaSet, "
        "ReplicationController, StatefulSet, DaemonSet, Job, CronJob, List, PodList"]
    objects = json.loads(done.stdout)
    assert len({o["pod"] for o in objects}) == 2
    for o in objects:
        assert o["pod"].startswith("shop/web-")
        # the RuntimeClass's handler reaches the pod as the runtime sees it
        assert o["requests"]["CreateContainer"]["pod"]["runtime_handler"] == "runsc"
        assert o["effective"]["oom_score_adj"] == -997


def test_replicas_option_overrides(policy_socket: Path) -> None:
    url = f"unix://{policy_socket}/v1/policies/no-latest"
    done = run_try("-", "--policy-url", url, "--output", "json", "--replicas", "3",
                   stdin=BUNDLE)
    assert done.returncode == 0, done.stderr
    assert len({o["pod"] for o in json.loads(done.stdout)}) == 3


def test_strict_refuses_and_sends_nothing(tmp_path: Path) -> None:
    sock_path = tmp_path / "policy.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(sock_path))
    listener.listen(8)
    listener.setblocking(False)
    try:
        done = run_try("-", "--policy-url", f"unix://{sock_path}/v1/policies/x", "--strict",
                       stdin=BUNDLE)
        assert done.returncode == 2
        assert done.stderr.startswith("nri-webhook-bridge try: <stdin> document 1 (Service "
                                      "web): kind: a Service makes no pod")
        assert done.stdout == ""
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody connected
    finally:
        listener.close()


@pytest.mark.parametrize(("args", "message"), [
    (["--node-memory", "-1Gi"], "--node-memory: must be positive, got '-1Gi'"),
    (["--node-cpus", "-2"], "--node-cpus: must be positive, got -2"),
    (["--replicas", "-1"], "--replicas: must be at least 1, got -1"),
    (["--node-memory", "1Zi"], "--node-memory: expected a quantity like 500m, 2 or 1Gi"),
])
def test_bad_values_answer_in_one_line(args: list[str], message: str) -> None:
    done = run_try("-", "--policy-url", "unix:///nonexistent/x.sock/p", *args, stdin=BUNDLE)
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"nri-webhook-bridge try: {message}")


def test_exa_node_memory(policy_socket: Path) -> None:
    url = f"unix://{policy_socket}/v1/policies/no-latest"
    pod = ("kind: Pod\nmetadata: {name: big}\nspec: {containers: [{name: c, image: i:1, "
           "resources: {requests: {memory: 1Ei}}}]}\n")
    done = run_try("-", "--policy-url", url, "--output", "json", "--node-memory", "2Ei",
                   stdin=pod)
    assert done.returncode == 0, done.stderr
    (o,) = json.loads(done.stdout)
    assert o["effective"]["oom_score_adj"] == 500  # 1000 - 1000 * 1Ei // 2Ei
