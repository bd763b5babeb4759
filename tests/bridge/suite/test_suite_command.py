"""`nri-webhook-bridge test` end to end: the example suites pass (CI runs them here), a wrong
expectation fails with a diff, the JUnit file, and bad suites exit 2 before anything runs.

The suites run for real: a private nri-policy-server per suite, the bridge as a process, the
runtime simulator (bridge.trial.play)."""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from bridge.cli import build_bridge_parser
from bridge.suite import suite_command


def main(argv: list[str]) -> int:
    """`nri-webhook-bridge test ...` in this process, without the CLI's logging setup (it would
    replace pytest's handlers); for the suites that never get to run."""
    return suite_command.main(build_bridge_parser("test").parse_args(argv))

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = sorted(str(p.relative_to(REPO)) for p in (REPO / "examples" / "tests").glob("*.yaml"))
NO_LATEST = '''
from policy_server import Decision, Event, EventName, Policy

policy = Policy("no-latest", description="reject images tagged :latest")


@policy.on(EventName.CREATE_CONTAINER)
def no_latest(event: Event) -> Decision | None:
    image = event.container.annotations.get("io.kubernetes.cri.image-name", "")
    if image.endswith(":latest"):
        return Decision(reject=f"image {image} uses :latest")
    return None
'''
LABEL_ENV = REPO / "examples" / "label_env_policy.py"
LSR_POD = REPO / "examples" / "pods" / "lsr-pod.yaml"
# Two cases that hold and one whose expected team is wrong.
ONE_WRONG = f"""\
webhooks:
  policy_modules: [{LABEL_ENV}, no_latest.py]
cases:
  - name: the team is set
    manifests: [{LSR_POD}]
    expect:
      - {{pod: shop/latency-critical, webhook: label-env, verdict: adjusted,
          adjust: {{env: [{{key: TEAM, value: payments}}]}}}}
  - name: latest is refused
    manifests:
      - {{kind: Pod, metadata: {{name: risky}},
          spec: {{containers: [{{name: app, image: "app:latest"}}]}}}}
    expect:
      - {{pod: default/risky, container: app, reject: "uses :latest$"}}
  - name: the wrong team
    manifests: [{LSR_POD}]
    expect:
      - pod: shop/latency-critical
        effective:
          env: {{contains: TEAM=finance}}
          oom_score_adj: -997
"""


def run_test(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bridge", "test", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.processes
@pytest.mark.timeout(600)  # a ceiling for a loaded machine: about 20 s when idle
def test_the_example_suites_pass(tmp_path: Path) -> None:
    done = run_test(*EXAMPLES, "--junit", str(tmp_path / "junit.xml"))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert all(line.startswith("PASS examples/tests/") for line in lines[:-1]), done.stdout
    assert lines[-1] == f"{len(lines) - 1} passed, 0 failed"
    assert len(lines) - 1 >= 11


@pytest.fixture(scope="module")
def one_wrong(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str],
                                                                  Path]:
    work = tmp_path_factory.mktemp("suite")
    (work / "no_latest.py").write_text(NO_LATEST)
    (work / "suite.yaml").write_text(ONE_WRONG)
    return run_test("suite.yaml", "--junit", "out.xml", cwd=work), work


@pytest.mark.processes
@pytest.mark.timeout(600)  # runs the module's suite (the fixture) when first
def test_one_wrong_expectation_fails_with_a_diff(
        one_wrong: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    done, _ = one_wrong
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[:6] == [
        "PASS suite.yaml: the team is set",
        "PASS suite.yaml: latest is refused",
        "FAIL suite.yaml: the wrong team",
        "    shop/latency-critical app: effective env",
        '      expected: contains "TEAM=finance"',
        "      got:",
    ]
    assert '          "TEAM=payments"' in lines  # what the container has, one item a line
    assert "oom_score_adj" not in done.stdout  # the expectation that held is not shown
    assert lines[-1] == "2 passed, 1 failed"
    assert done.stderr == ""  # the reject is the case's verdict, not a warning on stderr


@pytest.mark.processes
@pytest.mark.timeout(600)
def test_the_junit_file_parses_with_the_right_counts(
        one_wrong: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    _, work = one_wrong
    root = ET.parse(work / "out.xml").getroot()
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("3", "1", "0")
    (suite,) = root.findall("testsuite")
    assert (suite.get("name"), suite.get("tests"), suite.get("failures")) == (
        "suite.yaml", "3", "1")
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["the team is set", "latest is refused",
                                              "the wrong team"]
    assert [c.find("failure") is not None for c in cases] == [False, False, True]
    failure = cases[2].find("failure")
    assert failure is not None and 'expected: contains "TEAM=finance"' in (failure.text or "")
    assert all(float(c.get("time") or "-1") >= 0 for c in cases)


@pytest.mark.processes
def test_a_webhook_that_cannot_be_reached_fails_the_case(tmp_path: Path) -> None:
    (tmp_path / "suite.yaml").write_text(
        f"webhooks: {{url: 'unix://{tmp_path}/nothing.sock/p'}}\n"
        f"cases: [{{name: nobody home, manifests: [{LSR_POD}],\n"
        "         expect: [{pod: shop/latency-critical, verdict: unchanged}]}]\n")
    done = run_test("suite.yaml", "--junit", "out.xml", cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr  # a call failed, as `try` says it
    lines = done.stdout.splitlines()
    assert lines[0] == "FAIL suite.yaml: nobody home"
    assert lines[1].startswith("    error: webhook policy: call failed (Synchronize, "
                               "CreateContainer, StopContainer): connect_error: ")
    assert lines[-1] == "0 passed, 1 failed"
    root = ET.parse(tmp_path / "out.xml").getroot()
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("1", "0", "1")


# -- bad suites: exit 2, the file and field named, nothing run ---------------------------------

GOOD_HEAD = "webhooks: {url: 'unix:///nonexistent.sock/p'}\n"
POD = "{kind: Pod, metadata: {name: p}, spec: {containers: [{name: c, image: i}]}}"


@pytest.mark.parametrize(("text", "message"), [
    ("[1, 2]", "suite.yaml: expected a mapping with webhooks and cases"),
    ("webhooks: {url: x\n", "suite.yaml: not YAML"),
    (GOOD_HEAD + "cases: []", "suite.yaml: cases: List should have at least 1 item"),
    (GOOD_HEAD + f"cases: [{{name: a, manifests: [{POD}], expect: [{{pod: p, verdic: x}}]}}]",
     "suite.yaml: cases[0].expect[0].verdic: unknown key"),
    (GOOD_HEAD + f"cases: [{{name: a, manifests: [{POD}], expect: [{{pod: p, verdict: ok}}]}}]",
     "suite.yaml: cases[0].expect[0].verdict: Input should be 'adjusted', 'unchanged' or "
     "'rejected'"),
    (GOOD_HEAD + "cases: [{name: a, manifests: [nope.yaml], expect: [{pod: p}]}]",
     "suite.yaml: cases[0].manifests[0]: nope.yaml: no such file (relative to the suite)"),
    (GOOD_HEAD + "cases: [{name: a, manifests: [{kind: Pod, metadata: {name: p}, spec: "
     "{containers: [{name: c}]}}], expect: [{pod: p}]}]",
     "suite.yaml: cases[0].manifests: suite.yaml cases[0].manifests[0] (Pod p): "
     "spec.containers[0] (c).image: missing"),
    (GOOD_HEAD + f"node: {{memory: lots}}\ncases: [{{name: a, manifests: [{POD}], "
     "expect: [{pod: p}]}]", "suite.yaml: node.memory: "),
    (GOOD_HEAD + f"node: {{profile: docker}}\ncases: [{{name: a, manifests: [{POD}], "
     "expect: [{pod: p}]}]", "suite.yaml: node.profile: unknown profile 'docker'"),
    (f"webhooks: {{url: x, rules: r.yaml}}\ncases: [{{name: a, manifests: [{POD}], "
     "expect: [{pod: p}]}]", "suite.yaml: webhooks: give one of config, url or "
     "policy_modules/rules/policies, not url and policy_modules/rules/policies"),
    (f"webhooks: {{policy_modules: [gone.py]}}\ncases: [{{name: a, manifests: [{POD}], "
     "expect: [{pod: p}]}]", "suite.yaml: webhooks.policy_modules[0]: gone.py: no such file"),
    (f"webhooks: {{url: 'ftp://x/p'}}\ncases: [{{name: a, manifests: [{POD}], "
     "expect: [{pod: p}]}]", "suite.yaml: webhooks.url: webhooks[0].url: "),
])
def test_a_bad_suite_exits_2_naming_the_file_and_field(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        text: str, message: str) -> None:
    (tmp_path / "suite.yaml").write_text(text)
    monkeypatch.chdir(tmp_path)
    assert main(["test", "suite.yaml"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    err = re.sub(r"^(nri-webhook-bridge test: suite\.yaml):\d+:", r"\1:", err)
    assert err.startswith(f"nri-webhook-bridge test: {message}"), err


def test_one_bad_suite_stops_them_all_before_anything_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bad.yaml").write_text("webhooks: {}\n")
    monkeypatch.chdir(REPO)
    assert main(["test", EXAMPLES[0], str(tmp_path / "bad.yaml")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "bad.yaml:1: webhooks: give one of" in err


@pytest.mark.processes
def test_a_policy_module_the_server_refuses_is_a_bad_suite(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("import not_a_module_anywhere\n")
    (tmp_path / "suite.yaml").write_text(
        f"webhooks: {{policy_modules: [broken.py]}}\n"
        f"cases: [{{name: a, manifests: [{POD}], expect: [{{pod: p}}]}}]\n")
    done = run_test("suite.yaml", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith(
        "nri-webhook-bridge test: suite.yaml: webhooks.policy_modules: policy module "), done.stderr
    assert "No module named 'not_a_module_anywhere'" in done.stderr


def _yaml_block_after(path: Path, marker: str) -> str:
    text = path.read_text()
    start = text.index("```yaml\n", text.index(marker)) + len("```yaml\n")
    return text[start:text.index("```", start)]


@pytest.mark.processes
@pytest.mark.timeout(600)
def test_the_suites_in_readme_and_the_docs_pass_as_written(tmp_path: Path) -> None:
    examples = REPO / "examples"
    for name, path, marker in [("readme.yaml", REPO / "README.md", "**Policy tests for CI**"),
                               ("docs.yaml", REPO / "docs" / "policy-tests.md", "## A suite")]:
        # Written as if in examples/tests/: their paths start at ../
        block = _yaml_block_after(path, marker).replace("../", f"{examples}/")
        (tmp_path / name).write_text(block)
    done = run_test("readme.yaml", "docs.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "3 passed, 0 failed"
