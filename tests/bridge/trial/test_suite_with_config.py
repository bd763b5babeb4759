"""`nri-webhook-bridge test` with `webhooks: {config: FILE}`: a bridge configuration whose
webhooks point at a server already running (this package's policy server on a private socket,
standing for a policy in any language), each webhook named as the configuration names it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO, bridge_config

pytestmark = pytest.mark.processes  # starts processes: not in make check

SUITE = f"""\
webhooks: {{config: bridge.yaml}}
node: {{cpus: 16, memory: 64Gi}}
cases:
  - name: both webhooks of the configuration adjust the LSR pod
    manifests: [{REPO}/examples/pods/lsr-pod.yaml]
    expect:
      - pod: shop/latency-critical
        webhook: koordinator-qos
        adjust: {{linux.resources.cpu.cpus: "2-3"}}
      - pod: shop/latency-critical
        webhook: label-env
        adjust: {{env: [{{key: TEAM, value: payments}}]}}
        warnings: []
      - pod: shop/latency-critical
        effective: {{env: {{contains: TEAM=payments}}, resources.cpu.cpus: "2-3"}}
  - name: a rejecting policy in the same configuration
    manifests:
      - {{kind: Pod, metadata: {{name: risky, namespace: dev}},
          spec: {{containers: [{{name: app, image: "app:latest"}}]}}}}
    expect:
      - {{pod: dev/risky, verdict: rejected, reject: "^no_latest: image app:latest uses :latest$"}}
"""


def test_a_suite_over_a_bridge_configuration(tmp_path: Path, policy_socket: Path) -> None:
    config = bridge_config(tmp_path, policy_socket)
    text = config.read_text() + (
        "  - name: no-latest\n"
        f"    url: unix://{policy_socket}/v1/policies/no-latest\n"
        "    events: [CreateContainer]\n")
    config.write_text(text)
    (tmp_path / "suite.yaml").write_text(SUITE)
    done = subprocess.run([sys.executable, "-m", "bridge", "test", "suite.yaml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [
        "PASS suite.yaml: both webhooks of the configuration adjust the LSR pod",
        "PASS suite.yaml: a rejecting policy in the same configuration",
        "2 passed, 0 failed"]
