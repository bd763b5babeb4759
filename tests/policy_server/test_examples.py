"""The examples work: the third-party Python policy, the Node.js policy, koordinator fixtures."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from bridge.contract import WebhookReply
from policy_server.engine.evaluate import Engine
from policy_server.engine.loader import load_policies
from policy_server.exceptions import PolicyLoadError
from policy_server.sdk.registry import Registry
from policy_server.service import PolicyServer, ServerOptions
from tests.policy_server.factory import evaluate_json, reply_of
from tests.waiting import healthz, wait_until

ROOT = Path(__file__).parents[2]
REQUESTS = ROOT / "examples" / "requests"


def request(name: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((REQUESTS / name).read_text())
    return body


def test_label_env_policy_module() -> None:
    registry = Registry()
    for policy in load_policies([str(ROOT / "examples/label_env_policy.py")]):
        registry.add(policy)
    engine = Engine(registry)
    def reply(name: str) -> dict[str, Any]:
        return reply_of(evaluate_json(engine, "label-env", request(name)))

    assert reply("label-env-create.json") == {
        "adjust": {"env": [{"key": "TEAM", "value": "payments"}]}}
    assert reply("label-env-create-unlabelled.json") == {
        "warnings": ["pod default/orphan has no example.com/team"]}


def test_koordinator_examples_give_the_documented_replies() -> None:
    server = PolicyServer(ServerOptions(rules_path=ROOT / "examples/koordinator-rules.yaml"))

    def reply(name: str) -> dict[str, Any]:
        return reply_of(evaluate_json(server.engine, "koordinator-qos", request(name)))

    assert reply("koord-create-lsr-pinned.json")["adjust"] == {
        "linux": {"resources": {"cpu": {"quota": -1, "cpus": "2-3"}}}}
    assert reply("koord-create-be-batch.json")["adjust"] == {"linux": {"resources": {
        "cpu": {"shares": 512, "quota": 41667}, "memory": {"limit": 2147483648}}}}
    gpu = reply("koord-create-gpu-hami.json")["adjust"]
    assert gpu["env"][0] == {"key": "NVIDIA_VISIBLE_DEVICES", "value": "1"}
    assert {"key": "CUDA_DEVICE_MEMORY_LIMIT", "value": "8589934592"} in gpu["env"]
    assert reply("koord-update-ls.json") == {"update": [{"container_id": "c-ls-1", "linux": {
        "resources": {"cpu": {"quota": 166667}}}}]}  # the example names no pools: any node
    sync = reply("koord-synchronize.json")
    assert [u["container_id"] for u in sync["update"]] == ["c-lsr-1", "c-be-1", "c-ls-1"]
    assert "warnings" not in sync


@pytest.mark.parametrize(
    ("source", "fragment"),
    [
        ("def broken(:\n", "syntax error at line 1"),
        ("raise RuntimeError('boom')\n", "RuntimeError: boom (line 1"),
        ("x = 1\n", "defines no Policy"),
    ],
)
def test_bad_policy_modules_are_reported(tmp_path: Path, source: str, fragment: str) -> None:
    path = tmp_path / "policy.py"
    path.write_text(source)
    with pytest.raises(PolicyLoadError, match=fragment.replace("(", r"\(")):
        load_policies([str(path)])
    with pytest.raises(PolicyLoadError, match="no such file"):
        load_policies([str(tmp_path / "missing.py")])
    with pytest.raises(PolicyLoadError, match="ModuleNotFoundError"):
        load_policies(["no_such_module_anywhere"])


@pytest.mark.processes
@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
async def test_node_policy_over_a_unix_socket(tmp_path: Path) -> None:
    sock = tmp_path / "team.sock"
    proc = await asyncio.create_subprocess_exec(
        "node", str(ROOT / "examples/shell-policy/server.js"), str(sock),
        stdout=asyncio.subprocess.PIPE)
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 10)
        assert line.decode().startswith("listening on unix://")
        transport = httpx.AsyncHTTPTransport(uds=str(sock))
        async with httpx.AsyncClient(transport=transport, base_url="http://p") as client:
            url = "/v1/policies/team-env"
            labelled = (await client.post(url, json=request("label-env-create.json"))).json()
            assert labelled == {"adjust": {"env": [{"key": "TEAM", "value": "payments"}]}}
            WebhookReply.model_validate(labelled)
            bare = (await client.post(url, json=request("label-env-create-unlabelled.json")))
            assert bare.json() == {"warnings": ["pod default/orphan has no example.com/team"]}
            bad = await client.post(url, json={"api_version": "v0"})
            assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == [
                "body", "api_version"]
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 10)


@pytest.mark.processes
def test_cli_serves_the_example_module(tmp_path: Path) -> None:
    sock = tmp_path / "p.sock"
    cmd = [sys.executable, "-m", "policy_server.main", "--uds", str(sock), "--no-koordinator",
           "--policy-module", str(ROOT / "examples/label_env_policy.py"), "--log-level", "warning"]
    proc = subprocess.Popen(cmd, cwd=ROOT)
    try:
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(sock), retries=0),
                          base_url="http://p", timeout=5) as client:
            wait_until(healthz(sock), what="the example module's server is healthy",
                       timeout_s=30, proc=proc)
            policies = client.get("/v1/policies").json()
            assert [p["name"] for p in policies["policies"]] == ["label-env"]
            reply = client.post("/v1/policies/label-env", json=request("label-env-create.json"))
            assert reply.json() == {"adjust": {"env": [{"key": "TEAM", "value": "payments"}]}}
    finally:
        proc.terminate()
        assert proc.wait(10) == 0
    assert not sock.exists()  # removed on shutdown


@pytest.mark.processes
def test_cli_startup_errors_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "rules.yaml"
    bad.write_text("features: {GPUEnvInject: maybe}\n")
    run = subprocess.run(
        [sys.executable, "-m", "policy_server.main", "--uds", str(tmp_path / "s.sock"),
         "--rules", str(bad)], capture_output=True, text=True, cwd=ROOT, timeout=30)
    assert run.returncode == 2
    assert "features.GPUEnvInject: expected true or false" in run.stderr
    assert str(bad) in run.stderr
    check = subprocess.run(
        [sys.executable, "-m", "policy_server.main", "--rules",
         str(ROOT / "examples/koordinator-rules.yaml"), "--check-rules"],
        capture_output=True, text=True, cwd=ROOT, timeout=30)
    assert check.returncode == 0
    assert json.loads(check.stdout)["cpu_normalization_ratio"] == 1.2
    both = subprocess.run(
        [sys.executable, "-m", "policy_server.main", "--uds", "/tmp/x.sock", "--host", "::1",
         "--port", "1"], capture_output=True, text=True, cwd=ROOT, timeout=30)
    assert both.returncode == 2 and "mutually exclusive" in both.stderr
