"""Issue 34, what a CI user expects: a subset of cases (`--case`), a directory of suites, JSON
output (one object per case, expected and got), a suite's own environment for its policy
modules, built-in policies, pods already on the node, and exit 3 when a webhook call failed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.processes  # starts processes: not in make check

REPO = Path(__file__).resolve().parents[3]
LSR_POD = REPO / "examples" / "pods" / "lsr-pod.yaml"
NAMESPACE_GUARD = '''
import os

from policy_server import Decision, Event, EventName, Policy

policy = Policy("node-guard")


@policy.on(EventName.CREATE_CONTAINER)
def guard(event: Event) -> Decision | None:
    allowed = os.environ.get("NODE_GUARD_NAMESPACES", "").split(",")
    if event.pod.namespace not in allowed:
        return Decision(reject=f"namespace {event.pod.namespace} is not allowed here")
    return None
'''


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bridge", "test", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300, check=False,
                          env={"PATH": "/usr/bin:/bin", "NODE_GUARD_NAMESPACES": "elsewhere"})


@pytest.fixture(scope="module")
def suites(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("ci")
    (work / "guard.py").write_text(NAMESPACE_GUARD)
    (work / "suites").mkdir()
    (work / "suites" / "guard.yaml").write_text(
        "webhooks:\n"
        "  policy_modules: [../guard.py]\n"
        "  env: {NODE_GUARD_NAMESPACES: 'shop,default'}  # pinned: not the caller's\n"
        "cases:\n"
        f"  - name: shop is allowed\n    manifests: [{LSR_POD}]\n"
        "    expect: [{pod: shop/latency-critical, verdict: unchanged}]\n"
        "  - name: kube-system is not\n"
        "    manifests: [{kind: Pod, metadata: {name: p, namespace: kube-system},\n"
        "                 spec: {containers: [{name: c, image: i}]}}]\n"
        "    expect: [{pod: kube-system/p, verdict: unchanged}]   # wrong on purpose\n")
    (work / "suites" / "pools.yaml").write_text(
        "webhooks:\n"
        "  policies: {cpu-pools: {layout: {0: '0-3'}, reserved_cpus: '0'}}\n"
        "node:\n"
        "  pods:   # already on the node: 2 of the 3 CPUs that can be exclusive\n"
        "    - {kind: Pod, metadata: {name: big, namespace: shop}, spec: {containers: [\n"
        "        {name: c, image: i, resources: {limits: {cpu: '2', memory: 1Gi}}}]}}\n"
        "cases:\n"
        "  - name: the node's pod holds CPUs, so a second big pod does not fit\n"
        "    manifests:\n"
        "      - {kind: Pod, metadata: {name: late, namespace: shop}, spec: {containers: [\n"
        "          {name: c, image: i, resources: {limits: {cpu: '2', memory: 1Gi}}}]}}\n"
        "    expect:\n"
        "      - {pod: shop/big, effective: {resources.cpu.cpus: '1-2'}}\n"
        "      - {pod: shop/late, reject: needs 2 exclusive CPUs}\n")
    (work / "suites" / "notes.txt").write_text("not a suite\n")
    return work


@pytest.mark.timeout(600)
def test_a_directory_of_suites_with_json_output(suites: Path) -> None:
    done = run("suites", "--output", "json", cwd=suites)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(o["suite"], o["case"], o["status"]) for o in lines] == [
        ("suites/guard.yaml", "shop is allowed", "pass"),
        ("suites/guard.yaml", "kube-system is not", "fail"),
        ("suites/pools.yaml", "the node's pod holds CPUs, so a second big pod does not fit",
         "pass"),
    ]
    (mismatch,) = lines[1]["mismatches"]
    assert mismatch["where"] == "kube-system/p c: verdict"
    assert mismatch["expected"] == "unchanged"
    assert mismatch["got"].startswith("rejected (node-guard, CreateContainer: guard: "
                                      "namespace kube-system is not allowed here)")


@pytest.mark.timeout(600)
def test_case_runs_a_subset(suites: Path) -> None:
    done = run("suites", "--case", "^shop", "--case", "second big", cwd=suites)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "2 passed, 0 failed"
    nothing = run("suites", "--case", "no such case", cwd=suites)
    assert nothing.returncode == 2 and "matches no case" in nothing.stderr
