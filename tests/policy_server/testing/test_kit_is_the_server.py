"""The test kit's reply is the server's, byte for byte: one settle step (issue 44.3).

Every example request (``schemas/webhook/examples``, ``examples/requests``), the recorded
webhook requests (``examples/python-policy/recording.jsonl``) and the webhook requests of the
recorded runtime sessions (``bridge/simulator/scenarios/*-wire*.jsonl``, encoded by the bridge's
one request encoder) go, in order, to every example policy, once through the test kit and once
through the policy server's route (``hot_route.evaluate_body``, the bytes the HTTP route
sends): status and bytes must match. A real ``nri-policy-server`` process answers the finding's
case (a policy returning a cgroup write: the kit said ``{}``, the server warned) with the kit's
bytes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from bridge.contract.catalogue import EventName
from bridge.contract.request_body import (
    DEFAULT_BUDGET_MS,
    DEFAULT_RUNTIME,
    envelope_document,
    event_payload,
)
from policy_server.bridge_link.control_client import BridgeControl
from policy_server.engine.loader import load_policies
from policy_server.http_edge.hot_route import evaluate_body
from policy_server.policies import build_builtin
from policy_server.sdk.decision import Decision
from policy_server.sdk.effects import CgroupWrite
from policy_server.sdk.model import Event
from policy_server.sdk.registry import Policy
from policy_server.service import PolicyServer, ServerOptions
from policy_server.testing import InvalidRequest, PolicyRunner, make_request
from tests.hardening.processes import POLICY_SERVER, Process
from tests.integration.harness import short_tmpdir
from tests.recordings import load_wire_log, sync_payload
from tests.waiting import accepts, until

ROOT = Path(__file__).parents[3]
EXAMPLES = ROOT / "examples"
BUILTINS = (
    ("koordinator-qos", EXAMPLES / "koordinator-rules.yaml"),
    ("cpu-pools", EXAMPLES / "policies" / "cpu-pools.yaml"),
    ("device-injector", EXAMPLES / "policies" / "device-injector.yaml"),
    ("hook-injector", EXAMPLES / "policies" / "hook-injector.yaml"),
    ("ulimit-adjuster", EXAMPLES / "policies" / "ulimit-adjuster.yaml"),
    ("cel", EXAMPLES / "policies" / "cel"),
)
MODULES = (
    EXAMPLES / "label_env_policy.py",
    EXAMPLES / "memory_cap_policy.py",
    EXAMPLES / "python-policy" / "downward_env.py",
)
WIRE_LOGS = sorted((ROOT / "bridge" / "simulator" / "scenarios").glob("*-wire*.jsonl"))


def _wire_requests(path: Path) -> Iterator[dict[str, Any]]:
    """The webhook requests the bridge sends for a recorded runtime session's events."""
    for i, line in enumerate(load_wire_log(path)):
        if line.rpc == "Synchronize":
            event = EventName.SYNCHRONIZE.value
            payload = sync_payload(line.request.pods, line.request.containers)  # type: ignore[attr-defined]
        elif line.event is not None:
            event = line.event.rpc_name
            payload = event_payload(event, line.request)
        else:  # Configure, Shutdown, UpdateContainers: not webhook requests
            continue
        yield envelope_document(event, f"{path.stem}-{i}", dict(DEFAULT_RUNTIME),
                                DEFAULT_BUDGET_MS, False, payload)


def requests() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in sorted((ROOT / "schemas" / "webhook" / "examples").glob("*.request.json")):
        out.append(json.loads(path.read_text()))
    for path in sorted((EXAMPLES / "requests").glob("*.json")):
        out.append(json.loads(path.read_text()))
    recording = EXAMPLES / "python-policy" / "recording.jsonl"
    out.extend(json.loads(line)["request"] for line in recording.read_text().splitlines()
               if line.strip())
    for path in WIRE_LOGS:
        out.extend(_wire_requests(path))
    return out


def _bridge() -> BridgeControl:
    """The bridge's control API answering every push (the kit's outlet takes every job)."""
    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"failed": []})

    return BridgeControl("http://bridge", transport=httpx.MockTransport(handle))


def _server(tmp_path: Path, builtin: tuple[str, Path] | None, module: Path | None,
            extra: tuple[Policy[Any], ...] = ()) -> PolicyServer:
    return PolicyServer(ServerOptions(
        default_policies=False,
        builtin_policies=(builtin,) if builtin is not None else (),
        policy_modules=(str(module),) if module is not None else (),
        cgroup_root=tmp_path,  # an empty tree: nothing probed, the same facts for the kit
        bridge_control="http://bridge",
    ), list(extra), bridge=_bridge())


async def _compare(server: PolicyServer, kit: PolicyRunner,
                   bodies: list[dict[str, Any]]) -> dict[str, int]:
    """Send every body to every policy through both; the counts of replies compared."""
    seen = {"replies": 0, "refused": 0, "warned": 0, "changed": 0}
    for body in bodies:
        raw = orjson.dumps(body)
        for name in kit.policy_names:
            status, sent = await evaluate_body(server, name, raw)
            try:
                reply = kit.send(body, name)
            except InvalidRequest:
                assert status in (400, 422), (name, body.get("uid"), status, sent)
                seen["refused"] += 1
                continue
            assert status == 200, (name, body.get("uid"), sent)
            assert reply.settled.body() == sent, (name, body.get("uid"))
            assert orjson.dumps(reply.json) == sent
            seen["replies"] += 1
            seen["warned"] += bool(reply.warnings)
            seen["changed"] += not reply.no_change
    return seen


@pytest.mark.parametrize("builtin", BUILTINS, ids=lambda b: b[0])
async def test_every_example_request_gets_the_servers_bytes_from_the_kit(
        tmp_path: Path, builtin: tuple[str, Path]) -> None:
    server = _server(tmp_path, builtin, None)
    try:
        kit = PolicyRunner(build_builtin(builtin[0], builtin[1], server.facts),
                           facts=server.facts)
        bodies = requests()
        seen = await _compare(server, kit, bodies)
    finally:
        await server.aclose()
    assert seen["replies"] + seen["refused"] == len(bodies) > 100
    assert seen["replies"] > 0


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.stem)
async def test_every_example_request_gets_the_servers_bytes_from_the_kit_module(
        tmp_path: Path, module: Path) -> None:
    server = _server(tmp_path, None, module)
    try:
        kit = PolicyRunner(*load_policies([str(module)]), facts=server.facts)
        bodies = requests()
        seen = await _compare(server, kit, bodies)
    finally:
        await server.aclose()
    assert seen["replies"] > 0


def _writer() -> Policy[None]:
    policy = Policy("pod-writer")

    @policy.on(EventName.RUN_POD_SANDBOX)
    def write(event: Event) -> Decision:
        assert event.pod is not None
        return Decision(effects=(CgroupWrite(f"kubepods/pod{event.pod.uid}", "cpu.shares", 2),),
                        warnings=("wrote",))

    return policy


WRITER_MODULE = '''
from policy_server import Decision, Event, EventName, Policy
from policy_server.sdk.effects import CgroupWrite

policy = Policy("pod-writer")


@policy.on(EventName.RUN_POD_SANDBOX)
def write(event: Event) -> Decision:
    return Decision(effects=(CgroupWrite(f"kubepods/pod{event.pod.uid}", "cpu.shares", 2),),
                    warnings=("wrote",))
'''


@pytest.mark.processes
async def test_a_cgroup_write_gets_the_servers_warning_from_the_kit() -> None:
    """The finding: the kit answered ``{"warnings": ["wrote"]}`` where the server ``try`` runs
    (``--pod-cgroup-writes off``, report only) also says the write was not applied. A real
    server process answers, with the kit's bytes."""
    body = make_request("RunPodSandbox", pod={"id": "p1", "name": "web", "namespace": "default",
                                              "uid": "u-1"})
    kit = PolicyRunner(_writer()).send(body)
    assert kit.warnings == ["wrote", "pod cgroup writes not applied (executor off): "
                            "kubepods/podu-1: cpu.shares=2"]
    with short_tmpdir() as workdir:
        module = workdir / "pod_writer.py"
        module.write_text(WRITER_MODULE)
        sock = workdir / "policy.sock"
        server = await Process.start(
            [str(POLICY_SERVER), "--uds", str(sock), "--policy-module", str(module),
             "--no-koordinator", "--pod-cgroup-writes", "off", "--log-level", "warning"],
            workdir / "policy.log")
        try:
            await until(accepts(sock), what="the policy server listens", timeout_s=15.0,
                        in_thread=True, proc=server.proc, details=server.log_text)
            transport = httpx.AsyncHTTPTransport(uds=str(sock))
            async with httpx.AsyncClient(transport=transport) as client:
                answer = await client.post("http://policy/v1/policies/pod-writer",
                                           content=orjson.dumps(body),
                                           headers={"content-type": "application/json"})
        finally:
            await server.terminate()
    assert answer.status_code == 200
    assert answer.content == kit.settled.body() == orjson.dumps(kit.json)
