"""`try --policy-module/--rules`: a private nri-policy-server started and stopped by `try`
(no server started by hand, none other touched), and its startup errors as exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bridge.trial.private_server import PrivatePolicies, bridge_document, server_command

from .conftest import REPO, run_try

pytestmark = pytest.mark.processes  # starts processes: not in make check

LSR_POD = str(REPO / "examples" / "pods" / "lsr-pod.yaml")
RULES = str(REPO / "examples" / "koordinator-rules.yaml")
LABEL_ENV = str(REPO / "examples" / "label_env_policy.py")


def test_rules_and_a_module_from_a_private_server(tmp_path: Path) -> None:
    done = run_try(LSR_POD, "--rules", RULES, "--policy-module", LABEL_ENV, "--output", "json")
    assert done.returncode == 0, done.stderr
    (app,) = json.loads(done.stdout)
    assert app["adjust"]["koordinator-qos"]["linux"]["resources"]["cpu"]["cpus"] == "2-3"
    assert app["adjust"]["label-env"] == {"env": [{"key": "TEAM", "value": "payments"}]}
    assert "TEAM=payments" in app["effective"]["env"]
    # One webhook per policy, subscribed to the events the policy handles.
    assert set(app["requests"]) >= {"RunPodSandbox", "CreateContainer"}


def test_the_private_server_changes_nothing_on_the_node(tmp_path: Path) -> None:
    command = server_command(PrivatePolicies((LABEL_ENV,), RULES, 1), tmp_path)
    flags = dict(zip(command[3::2], command[4::2], strict=False))
    assert flags["--pod-cgroup-writes"] == "off"
    assert flags["--reconcile-interval"] == "0"
    for root in ("--cgroup-root", "--proc-root", "--resctrl-root", "--sys-root", "--uds"):
        assert Path(flags[root]).is_relative_to(tmp_path), root
    assert flags["--cgroup-version"] == "1"
    assert "--bridge-control" not in command
    assert "--no-koordinator" in server_command(PrivatePolicies((LABEL_ENV,)), tmp_path)


def test_one_webhook_per_policy_for_the_events_the_bridge_knows() -> None:
    served = [{"name": "a", "events": ["CreateContainer", "NotAnEvent"]},
              {"name": "idle", "events": []}]
    assert bridge_document(Path("/w/policy.sock"), served) == {"webhooks": [
        {"name": "a", "events": ["CreateContainer"],
         "url": "unix:///w/policy.sock/v1/policies/a"}]}


@pytest.mark.parametrize(("source", "flag", "message"), [
    ("import not_a_module_anywhere\n", "--policy-module",
     "nri-webhook-bridge try: policy module {path}: ModuleNotFoundError: No module named "
     "'not_a_module_anywhere'"),
    ("x = 1\n", "--policy-module",
     "nri-webhook-bridge try: policy module {path}: defines no Policy at module level"),
    ("node_slo: 3\n", "--rules",
     "nri-webhook-bridge try: node_slo: expected a mapping, got an integer (in {path})"),
])
def test_a_file_the_server_refuses_exits_2(tmp_path: Path, source: str, flag: str,
                                           message: str) -> None:
    path = tmp_path / ("policy.py" if flag == "--policy-module" else "rules.yaml")
    path.write_text(source)
    done = run_try(LSR_POD, flag, str(path))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines()[-1].startswith(message.format(path=path)), done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize(("args", "message"), [
    (["--rules", "/nonexistent/rules.yaml"], "--rules: /nonexistent/rules.yaml: no such file"),
    (["--policy-module", "/nonexistent/p.py"], "--policy-module: /nonexistent/p.py: no such file"),
    ([], "give one of --config, --policy-url or --policy-module/--rules/--policy"),
    (["--policy-url", "unix:///x.sock/p", "--rules", RULES],
     "give one of --config, --policy-url or --policy-module/--rules/--policy, not --policy-url "
     "and --policy-module/--rules/--policy"),
    (["--policy", "cpu-pools=/nonexistent/c.yaml"],
     "--policy cpu-pools: /nonexistent/c.yaml: no such file or directory"),
])
def test_bad_targets_exit_2(args: list[str], message: str) -> None:
    done = run_try(LSR_POD, *args)
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"nri-webhook-bridge try: {message}\n"
