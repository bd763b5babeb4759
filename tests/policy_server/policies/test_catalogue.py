"""Built-in policies are enabled by name on nri-policy-server (--policy NAME[=CONFIG])."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from policy_server.exceptions import PolicyLoadError
from policy_server.policies import CATALOGUE, build_builtin, describe_builtins, parse_policy_arg
from policy_server.policies.policy_config import PolicyConfigError
from policy_server.service import PolicyServer, ServerOptions
from policy_server.testing import make_request
from tests.policy_server.factory import evaluate_json, reply_of

ROOT = Path(__file__).parents[3]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "policy_server.main", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=30)  # fmt: skip


def test_every_catalogued_policy_builds_on_defaults_and_has_a_doc_page() -> None:
    for name in CATALOGUE:
        policy = build_builtin(name)
        assert policy.name == name
        assert (ROOT / "docs" / "policies" / f"{name}.md").is_file(), name
    assert set(describe_builtins()) == set(CATALOGUE)


def test_policy_argument_forms(tmp_path: Path) -> None:
    assert parse_policy_arg("ulimit-adjuster") == ("ulimit-adjuster", None)
    assert parse_policy_arg("ulimit-adjuster=/etc/x.yaml") == (
        "ulimit-adjuster", Path("/etc/x.yaml"))
    for bad, message in (("nope", "no built-in policy named 'nope' (known: "),
                         ("ulimit-adjuster=", "expected NAME or NAME=CONFIG_FILE"),
                         ("=x.yaml", "expected NAME or NAME=CONFIG_FILE")):  # fmt: skip
        with pytest.raises(PolicyLoadError, match=message.replace("(", r"\(")):
            parse_policy_arg(bad)


def test_config_file_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "u.yaml"
    bad.write_text("max: [\n")
    with pytest.raises(PolicyConfigError, match=f"policy ulimit-adjuster: {bad} is not valid YAML"
                       ": line 2, column 1: the text ends before what was opened is closed"):
        build_builtin("ulimit-adjuster", bad)
    bad.write_text("- 1\n")
    with pytest.raises(PolicyConfigError, match="must hold a mapping, not a list"):
        build_builtin("ulimit-adjuster", bad)
    with pytest.raises(PolicyConfigError, match=r"cannot read .*missing\.yaml"):
        build_builtin("ulimit-adjuster", tmp_path / "missing.yaml")
    bad.write_text("max: {nofile: lots}\n")
    with pytest.raises(PolicyConfigError, match=rf"\({bad}\): max.nofile: expected a non-neg"):
        build_builtin("ulimit-adjuster", bad)


def test_server_serves_enabled_builtins_next_to_koordinator() -> None:
    config = ROOT / "examples" / "policies" / "ulimit-adjuster.yaml"
    server = PolicyServer(ServerOptions(builtin_policies=(("ulimit-adjuster", config),)))
    assert [p.name for p in server.registry] == ["koordinator-qos", "ulimit-adjuster"]
    request = make_request("CreateContainer", pod_annotations={
        "ulimits.noderesource.dev/pod": "[{type: nofile, hard: 2000000}]"})
    reply = reply_of(evaluate_json(server.engine, "ulimit-adjuster", request))
    assert "exceeds this node's maximum 1048576" in reply["reject"]["reason"]


@pytest.mark.processes
def test_cli_lists_policies_and_refuses_unknown_ones() -> None:
    listed = cli("--list-policies")
    assert listed.returncode == 0
    assert [line.split()[0] for line in listed.stdout.splitlines()] == sorted(CATALOGUE)
    unknown = cli("--policy", "nope", "--uds", "/tmp/never.sock")
    assert unknown.returncode == 2
    assert "nri-policy-server: no built-in policy named 'nope'" in unknown.stderr
    bad = cli("--policy", "ulimit-adjuster=/no/such/file.yaml", "--uds", "/tmp/never.sock")
    assert bad.returncode == 2 and "cannot read /no/such/file.yaml" in bad.stderr


@pytest.mark.processes
def test_cli_checks_policy_configurations(tmp_path: Path) -> None:
    config = ROOT / "examples" / "policies" / "ulimit-adjuster.yaml"
    ok = cli("--check-policies", "--policy", f"ulimit-adjuster={config}",
             "--policy", "hook-injector")  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.splitlines() == [
        f"ok ulimit-adjuster ({config})", "ok hook-injector (defaults)"]
    bad = tmp_path / "d.yaml"
    bad.write_text("allowed_devices: [/etc/shadow]\n")
    failed = cli("--check-policies", "--policy", f"device-injector={bad}")
    assert failed.returncode == 2
    assert f"policy device-injector ({bad}): allowed_devices[0]: expected a /dev/ path" in (
        failed.stderr)
    assert cli("--check-policies").returncode == 2

