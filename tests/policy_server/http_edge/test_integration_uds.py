"""A real uvicorn policy server on a Unix socket, a real fake bridge on another; httpx over UDS."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import stat
from pathlib import Path

import httpx

from bridge.contract import WebhookReply
from policy_server.assemble import assemble
from policy_server.http_edge.hot_route import BULK_BODY_BYTES
from policy_server.service import ServerOptions
from tests.policy_server.factory import batch_spec, container, envelope, pod
from tests.policy_server.servers import FakeBridgeControl, serve_on_uds
from tests.waiting import until

RS = "scheduling.koordinator.sh/resource-status"
POOLS = "node.koordinator.sh/cpu-shared-pools"


def uds_client(path: Path) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=str(path)),
                             base_url="http://policy", timeout=5)


async def test_policy_server_over_a_unix_socket(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(f"topology: {{{POOLS}: [{{cpuset: '0-7'}}]}}\n")
    ls_pod = pod(pod_id="p1", uid="u1", qos="LS")
    fake = FakeBridgeControl(
        pods=[ls_pod], containers=[container(cid="c1", pod_id="p1", cpu={"cpus": "0-7"})]
    )
    assembly = assemble(ServerOptions(rules_path=rules,
                                      bridge_control=f"unix://{tmp_path}/bridge.sock",
                                      rules_poll_interval_s=0.05))
    async with (
        serve_on_uds(fake.app, tmp_path / "bridge.sock"),
        serve_on_uds(assembly.app, tmp_path / "policy.sock") as sock,
        uds_client(sock) as client,
    ):
        assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
        assert (await client.get("/healthz")).json()["rules"]["generation"] == 1

        be = pod(qos="BE", cgroup_parent="/kubepods/besteffort/p",
                 annotations=batch_spec({"app": {"limits": {"kubernetes.io/batch-cpu": "2k"}}}))
        reply = await client.post("/v1/policies/koordinator-qos",
                                  json=envelope("CreateContainer", pod=be, container=container()))
        assert reply.status_code == 200
        assert reply.json() == {"adjust": {"linux": {"resources": {
            "cpu": {"shares": 2, "quota": 200000}, "memory": {"limit": -1}}}}}
        WebhookReply.model_validate(reply.json())

        # The startup resync has run (its counter says so) and found nothing to change;
        # now the LS pool changes on disk. The bound only catches a hang.
        async def resynced() -> bool:
            return 'policy_resyncs_total{result="ok"} 1.0' in (await client.get("/metrics")).text
        await until(resynced, what="the start-up resync is counted", timeout_s=10)
        assert fake.pushed == []
        rules.write_text(f"topology: {{{POOLS}: [{{cpuset: '0-3'}}]}}\n")
        st = rules.stat()
        os.utime(rules, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        await asyncio.wait_for(fake.received.wait(), 5)
        assert fake.pushed == [{"container_id": "c1",
                                "linux": {"resources": {"cpu": {"cpus": "0-3"}}}}]
        assert (await client.get("/v1/rules")).json()["generation"] == 2


async def test_group_readable_socket(tmp_path: Path) -> None:
    assembly = assemble(ServerOptions())
    async with serve_on_uds(assembly.app, tmp_path / "p.sock", 0o660) as sock:
        assert stat.S_IMODE(os.stat(sock).st_mode) == 0o660
        async with uds_client(sock) as client:
            assert (await client.get("/v1/policies")).status_code == 200


async def test_a_synchronize_of_many_pods_is_answered_with_the_collector_paused_meanwhile(
    tmp_path: Path,
) -> None:
    # Bodies from BULK_BODY_BYTES up are answered with the cyclic GC off until the reply has
    # left (bridge.process_setup.gc_pause); the answer is the same, and the collector is on after.
    pods_n = 700
    pods, containers = [], []
    for i in range(pods_n):
        pods.append(pod(pod_id=f"p{i}", uid=f"u{i}", qos="BE",
                        cgroup_parent=f"/kubepods/besteffort/p{i}", annotations=batch_spec(
                            {"app": {"limits": {"kubernetes.io/batch-cpu": "2k"}}})))
        containers.append(container(cid=f"c{i}", pod_id=f"p{i}"))
    body = envelope("Synchronize", pods=pods, containers=containers)
    assert len(json.dumps(body)) >= BULK_BODY_BYTES
    assembly = assemble(ServerOptions())
    assert gc.isenabled()
    async with (
        serve_on_uds(assembly.app, tmp_path / "policy.sock") as sock,
        uds_client(sock) as client,
    ):
        reply = await client.post("/v1/policies/koordinator-qos", json=body)
        small = await client.post("/v1/policies/koordinator-qos", json=envelope(
            "Synchronize", pods=pods[:1], containers=containers[:1]))
    assert reply.status_code == 200 and small.status_code == 200
    updates = reply.json()["update"]
    assert [u["container_id"] for u in updates] == [f"c{i}" for i in range(pods_n)]
    # Each container's update is what a Synchronize of its pod alone gets.
    assert updates[0] == small.json()["update"][0]
    assert {json.dumps(u["linux"], sort_keys=True) for u in updates} == {
        json.dumps(updates[0]["linux"], sort_keys=True)}
    assert gc.isenabled()
