"""Issue 34, items 1-5: suites that passed when they should not. Each of them now fails the
case or is refused as a bad suite (exit 2), the problem named with its file, field and line.

The runs are real (a private nri-policy-server, the bridge as a process, the simulator)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.processes  # starts processes: not in make check

REPO = Path(__file__).resolve().parents[3]
LABEL_ENV = REPO / "examples" / "label_env_policy.py"
LSR_POD = REPO / "examples" / "pods" / "lsr-pod.yaml"
NO_LATEST = '''
from policy_server import Decision, Event, EventName, Policy

policy = Policy("no-latest")


@policy.on(EventName.CREATE_CONTAINER)
def no_latest(event: Event) -> Decision | None:
    image = event.container.annotations.get("io.kubernetes.cri.image-name", "")
    if image.endswith(":latest"):
        return Decision(reject=f"image {image} uses :latest")
    return None
'''
CRASHING = '''
from policy_server import Decision, Event, EventName, Policy

policy = Policy("crashing")


@policy.on(EventName.CREATE_CONTAINER)
def reads_a_missing_label(event: Event) -> Decision | None:
    return Decision(warnings=(event.pod.labels["not-there"],))
'''


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bridge", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.timeout(300)
def test_1_a_misspelt_webhook_name_is_a_bad_suite(tmp_path: Path) -> None:
    (tmp_path / "suite.yaml").write_text(
        f"webhooks: {{policy_modules: [{LABEL_ENV}]}}\n"
        "cases:\n"
        f"  - name: misspelt\n    manifests: [{LSR_POD}]\n"
        "    expect:\n"
        "      - pod: shop/latency-critical\n"
        "        webhook: labelenv\n"
        "        warnings: []\n")
    done = run("test", "suite.yaml", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""  # no case ran
    assert ("suite.yaml:7: cases[0].expect[0].webhook: no webhook named 'labelenv' is under "
            "test; did you mean label-env?") in done.stderr


def test_1_a_misspelt_webhook_name_of_a_configuration_is_found_at_load(tmp_path: Path) -> None:
    (tmp_path / "suite.yaml").write_text(
        "webhooks: {url: 'unix:///nowhere.sock/p'}\n"
        f"cases: [{{name: a, manifests: [{LSR_POD}],\n"
        "          expect: [{pod: shop/latency-critical, webhook: polcy, verdict: unchanged}]}]\n")
    done = run("test", "suite.yaml", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "cases[0].expect[0].webhook: no webhook named 'polcy'" in done.stderr


@pytest.mark.timeout(300)
def test_2_a_container_never_created_is_not_unchanged(tmp_path: Path) -> None:
    (tmp_path / "no_latest.py").write_text(NO_LATEST)
    (tmp_path / "suite.yaml").write_text(
        "webhooks: {policy_modules: [no_latest.py]}\n"
        "cases:\n"
        "  - name: the sidecar is rejected, so the app never starts\n"
        "    manifests:\n"
        "      - kind: Pod\n"
        "        metadata: {name: p}\n"
        "        spec:\n"
        "          initContainers: [{name: proxy, image: 'proxy:latest', restartPolicy: Always}]\n"
        "          containers: [{name: app, image: 'app:1'}]\n"
        "    expect:\n"
        "      - {pod: p, container: proxy, verdict: rejected}\n"
        "      - {pod: p, container: app, verdict: unchanged}\n")
    done = run("test", "suite.yaml", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "default/p app: verdict" in done.stdout
    assert "got:      never created (not started: " in done.stdout
    assert "default/p proxy" not in done.stdout  # the sidecar's expectation holds


@pytest.mark.timeout(300)
def test_3_a_raising_handler_fails_the_case_and_try(tmp_path: Path) -> None:
    (tmp_path / "crashing.py").write_text(CRASHING)
    (tmp_path / "suite.yaml").write_text(
        "webhooks: {policy_modules: [crashing.py]}\n"
        f"cases: [{{name: a crash, manifests: [{LSR_POD}],\n"
        "          expect: [{pod: shop/latency-critical, verdict: unchanged}]}]\n")
    done = run("test", "suite.yaml", cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr  # a failed call, as `try` says
    assert "FAIL suite.yaml: a crash" in done.stdout
    assert ("error: webhook crashing: call failed (CreateContainer): handler "
            "reads_a_missing_label raised KeyError: 'not-there'") in done.stdout
    tried = run("try", str(LSR_POD), "--policy-module", "crashing.py", cwd=tmp_path)
    assert tried.returncode == 3, tried.stdout + tried.stderr
    assert "handler reads_a_missing_label raised KeyError" in tried.stderr


@pytest.mark.parametrize("text", [
    "webhooks: {url: 'unix:///x.sock/p'}\nwebhooks: {url: 'unix:///y.sock/p'}\n"
    "cases: [{name: a, manifests: [pod.yaml], expect: [{pod: p}]}]\n",
    "webhooks: {url: 'unix:///x.sock/p'}\ncases:\n  - name: a\n    manifests: [pod.yaml]\n"
    "    expect: [{pod: p, verdict: rejected}]\n    expect: [{pod: p, verdict: unchanged}]\n",
], ids=["suite key", "case key"])
def test_4_a_duplicate_key_in_a_suite_is_a_bad_suite(tmp_path: Path, text: str) -> None:
    (tmp_path / "pod.yaml").write_text("kind: Pod\nmetadata: {name: p}\n"
                                       "spec: {containers: [{name: c, image: i}]}\n")
    (tmp_path / "suite.yaml").write_text(text)
    done = run("test", "suite.yaml", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "suite.yaml: not YAML: line " in done.stderr
    assert "found duplicate key" in done.stderr


def test_4_a_duplicate_key_in_a_manifest_is_a_manifest_error(tmp_path: Path) -> None:
    (tmp_path / "pod.yaml").write_text("kind: Pod\nmetadata: {name: p}\nspec:\n"
                                       "  containers: [{name: c, image: i, image: j}]\n")
    (tmp_path / "suite.yaml").write_text(
        "webhooks: {url: 'unix:///x.sock/p'}\n"
        "cases: [{name: a, manifests: [pod.yaml], expect: [{pod: p}]}]\n")
    done = run("test", "suite.yaml", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "pod.yaml: not YAML or JSON: line 4, column " in done.stderr
    assert "found duplicate key 'image'" in done.stderr
    tried = run("try", "pod.yaml", "--policy-url", "unix:///x.sock/p", cwd=tmp_path)
    assert tried.returncode == 2 and "found duplicate key 'image'" in tried.stderr


@pytest.mark.parametrize(("expect", "problem"), [
    ("effective: {resource.memory.limit: null}",
     "cases[0].expect[0].effective.resource.memory.limit: no container's effective values can "
     "have resource.memory.limit; did you mean resources.memory.limit?"),
    ("adjust: {linux.resources.cpu.cpu: null}",
     "cases[0].expect[0].adjust.linux.resources.cpu.cpu: no container's adjustment can have "
     "linux.resources.cpu.cpu; did you mean linux.resources.cpu.cpus?"),
])
def test_5_a_path_no_container_can_have_is_a_bad_suite(tmp_path: Path, expect: str,
                                                       problem: str) -> None:
    (tmp_path / "suite.yaml").write_text(
        "webhooks: {url: 'unix:///x.sock/p'}\n"
        f"cases: [{{name: a, manifests: [{LSR_POD}],\n"
        f"          expect: [{{pod: shop/latency-critical, {expect}}}]}}]\n")
    done = run("test", "suite.yaml", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"suite.yaml:3: {problem}" in done.stderr
