"""`try` against a live policy server (issue 25, items 10-12): every request is a dry run and
leaves the server's state alone, any failed webhook call exits 3 and is named per event (the
circuit breaker hides none), and the JSON output is the same bytes on every run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from policy_server.testing import make_request

from .conftest import REPO, bridge_config, policy_server, run_try
from .unix_webhook import JsonWebhook, serving

pytestmark = pytest.mark.processes  # starts processes: not in make check

GOLDEN = Path(__file__).parent / "golden" / "examples.json"
EXAMPLE_PODS = sorted(str(p) for p in (REPO / "examples" / "pods").glob("*.yaml"))
ONE_CPU_POD = """\
kind: Pod
metadata: {name: pinned, namespace: shop}
spec:
  containers: [{name: app, image: "app:1.0",
                resources: {limits: {cpu: "1", memory: 1Gi}}}]
"""


def guaranteed(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    pod = {"id": f"p-{name}", "name": name, "namespace": "live", "uid": name,
           "linux": {"cgroup_parent": f"/kubepods/pod{name}"}}
    cpu = {"shares": 1024, "quota": 100000, "period": 100000}
    return pod, {"id": f"c-{name}", "pod_sandbox_id": pod["id"], "name": name,
                 "linux": {"resources": {"cpu": cpu}}}


def cpus_of(reply: dict[str, Any]) -> str:
    return str(reply["adjust"]["linux"]["resources"]["cpu"]["cpus"])


def test_try_leaves_a_live_cpu_pools_server_alone(tmp_path: Path) -> None:
    """Item 10: try's Synchronize and pod events used to rebuild and change the live
    allocation, so the next real exclusive container got a CPU another pod held."""
    with policy_server(tmp_path, "--no-koordinator", "--policy",
                       f"cpu-pools={REPO / 'examples' / 'policies' / 'cpu-pools.yaml'}") as sock:
        transport = httpx.HTTPTransport(uds=str(sock))
        with httpx.Client(transport=transport, base_url="http://policy", timeout=10) as http:
            def real(event: str, **payload: Any) -> dict[str, Any]:
                body = make_request(event, uid=f"real-{event}-{len(payload)}", **payload)
                answer = http.post("/v1/policies/cpu-pools", json=body)
                assert answer.status_code == 200, answer.text
                reply: dict[str, Any] = answer.json()
                return reply

            real("Synchronize", pods=[], containers=[])
            pod_a, ctr_a = guaranteed("a")
            assert cpus_of(real("CreateContainer", pod=pod_a, container=ctr_a)) == "1"

            done = run_try("-", "--policy-url", f"unix://{sock}/v1/policies/cpu-pools",
                           "--output", "json", stdin=ONE_CPU_POD)
            assert done.returncode == 0, done.stderr
            (app,) = json.loads(done.stdout)
            # The would-be answer on try's node, which holds only this pod (cpu-pools refuses
            # exclusive CPUs before a Synchronize: try's dry-run one reached it)...
            assert app["adjust"]["policy"]["linux"]["resources"]["cpu"]["cpus"] == "1"
            assert app["effective"]["resources"]["cpu"]["cpus"] == "1"
            # ...and the live server still knows pod a holds CPU 1.
            pod_b, ctr_b = guaranteed("b")
            assert cpus_of(real("CreateContainer", pod=pod_b, container=ctr_b)) == "2"
            assert set(app["requests"]) >= {"CreateContainer", "StopContainer"}
            assert all(body["dry_run"] is True for body in app["requests"].values())


def test_misspelled_policy_exits_3_naming_each_failed_call(policy_socket: Path) -> None:
    url = f"unix://{policy_socket}/v1/policies/no-latets"
    done = run_try(EXAMPLE_PODS[1], "--policy-url", url)
    assert done.returncode == 3, done.stderr
    assert "policy (CreateContainer): warning: call failed: http_status: HTTP 404" in done.stdout
    failed = [line for line in done.stderr.splitlines() if "call failed:" in line]
    assert [line.split(": ")[2].split(" (")[0] for line in failed] == ["policy"] * 3
    assert "policy (Synchronize): http_status: HTTP 404" in failed[0]
    assert done.stderr.splitlines()[-1] == "nri-webhook-bridge try: 3 webhook call(s) failed"


def test_the_breaker_hides_no_failure(tmp_path: Path) -> None:
    """After 5 failures the breaker opened and later pods said "no change (no events)"."""
    config = tmp_path / "bridge.yaml"
    config.write_text(json.dumps({"webhooks": [{
        "name": "gone", "url": f"unix://{tmp_path}/nobody.sock/v1/policies/x",
        "events": ["CreateContainer"], "circuit_breaker": {"failure_threshold": 2}}]}))
    web = ("kind: Deployment\nmetadata: {name: web, namespace: shop}\nspec:\n  replicas: 7\n"
           "  template:\n    spec:\n      containers: [{name: web, image: 'web:1'}]\n")
    done = run_try("-", "--config", str(config), "--output", "json", stdin=web)
    assert done.returncode == 3, done.stderr
    objects = json.loads(done.stdout)
    assert len(objects) == 7
    for o in objects:
        assert [w["message"][:28] for w in o["warnings"]] == ["call failed: connect_error: "]
    assert done.stderr.splitlines()[-1] == "nri-webhook-bridge try: 7 webhook call(s) failed"


class _BadReplies(JsonWebhook):
    """A webhook whose replies are JSON objects outside the contract."""

    def reply(self, request: Any) -> Any:
        return {"adjust": "not an adjustment"}


@pytest.fixture
def bad_webhook(tmp_path: Path) -> Iterator[Path]:
    with serving(tmp_path / "bad.sock", _BadReplies) as sock:
        yield sock


def test_a_reply_the_bridge_refuses_exits_3(tmp_path: Path, bad_webhook: Path) -> None:
    config = tmp_path / "bridge.yaml"
    config.write_text(json.dumps({"webhooks": [{
        "name": "bad", "url": f"unix://{bad_webhook}/v1/policies/x",
        "events": ["CreateContainer"]}]}))
    done = run_try(EXAMPLE_PODS[1], "--config", str(config), "--output", "json")
    assert done.returncode == 3, done.stderr
    (app,) = json.loads(done.stdout)
    (warning,) = app["warnings"]
    assert warning["webhook"] == "bad" and warning["event"] == "CreateContainer"
    assert warning["message"].startswith("call failed: the bridge refused the reply: ")
    assert app["adjust"] == {}


def test_json_output_is_the_same_bytes_every_run(tmp_path: Path, policy_socket: Path) -> None:
    """Item 12: request uids were random and map keys in any order. Regenerate the golden file
    with UPDATE_GOLDEN=1 after a deliberate change, and read its diff."""
    config = bridge_config(tmp_path, policy_socket)
    runs = [run_try(*EXAMPLE_PODS, "--config", str(config), "--output", "json")
            for _ in range(2)]
    for done in runs:
        assert done.returncode == 0, done.stderr
    assert runs[0].stdout == runs[1].stdout
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.write_text(runs[0].stdout)
    assert runs[0].stdout == GOLDEN.read_text(), "try's output changed: see the module docstring"


def test_output_schema_resolves_with_the_stock_jsonschema_tool(tmp_path: Path) -> None:
    schemas = REPO / "schemas" / "try"
    tool = [sys.executable, "-W", "ignore", "-m", "jsonschema",
            "--base-uri", f"{schemas.as_uri()}/", str(schemas / "output.schema.json")]
    good = subprocess.run([*tool, "-i", str(GOLDEN)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert good.returncode == 0, good.stderr
    objects = json.loads(GOLDEN.read_text())
    objects[0]["adjust"] = {"koordinator-qos": {"linux": {"resources": {"cpu": {"shares": "x"}}}}}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(objects))
    refused = subprocess.run([*tool, "-i", str(bad)], capture_output=True, text=True,
                             timeout=120, check=False)
    assert refused.returncode == 1
    assert "is not valid under any of the given schemas" in refused.stderr, refused.stderr
