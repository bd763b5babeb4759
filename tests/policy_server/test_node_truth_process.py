"""The real nri-policy-server on a fake 2-CPU node (`--sys-root`, issue 45.1): a 16-CPU rules
file stops it at start (exit 2, the key named); a reload that names CPUs the node lacks is
refused, the previous rules stay, and /healthz says why."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from tests.waiting import healthz, log_tail, wait_until

pytestmark = pytest.mark.processes  # starts processes: not in make check

SHARED = "node.koordinator.sh/cpu-shared-pools"
SIXTEEN = {"topology": {SHARED: [{"socket": 0, "node": 0, "cpuset": "0-7"},
                                 {"socket": 1, "node": 1, "cpuset": "8-15"}]}}
FITS = {"topology": {SHARED: [{"socket": 0, "node": 0, "cpuset": "0-1"}]}}
KEY = f"topology.{SHARED}[0].cpuset"


def two_cpu_node(root: Path) -> Path:
    (root / "devices" / "system" / "cpu").mkdir(parents=True)
    (root / "devices" / "system" / "cpu" / "online").write_text("0-1\n")
    return root


def command(tmp_path: Path, rules: Path) -> list[str]:
    return [sys.executable, "-m", "policy_server.main", "--uds", str(tmp_path / "p.sock"),
            "--rules", str(rules), "--sys-root", str(two_cpu_node(tmp_path / "sys")),
            "--proc-root", str(tmp_path / "proc"), "--cgroup-root", str(tmp_path / "cgroup"),
            "--resctrl-root", str(tmp_path / "resctrl"), "--pod-cgroup-writes", "off",
            "--reconcile-interval", "0", "--rules-poll-interval", "0.2"]


def test_a_16_cpu_rules_file_stops_the_server_on_a_2_cpu_node(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump(SIXTEEN))
    done = subprocess.run(command(tmp_path, rules), capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert f"{KEY}: '0-7' names CPUs 2-7 the node does not have" in done.stderr


def test_a_reload_naming_missing_cpus_is_refused_and_shown_on_healthz(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump(FITS))
    sock = tmp_path / "p.sock"
    with (tmp_path / "server.log").open("wb") as log:
        proc = subprocess.Popen(command(tmp_path, rules), stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        wait_until(healthz(sock), what="the policy server is healthy", timeout_s=60,
                   proc=proc, details=log_tail(tmp_path / "server.log"))
        rules.write_text(yaml.safe_dump(SIXTEEN))

        def rules_status() -> dict[str, object]:
            transport = httpx.HTTPTransport(uds=str(sock))
            with httpx.Client(transport=transport, base_url="http://local", timeout=5) as c:
                status: dict[str, object] = c.get("/healthz").json()["rules"]
                return status

        wait_until(lambda: rules_status()["last_error"] is not None,
                   what="the reload is refused", timeout_s=60)
        status = rules_status()
        assert KEY in str(status["last_error"]) and status["generation"] == 1
        assert proc.poll() is None  # still serving, on the previous rules
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
