"""What a webhook may return (issue 42 items 3 and 4): a compromised policy against the real
bridge process on the runtime simulator, with a fake sysfs root.

One bridge, three webhooks on the same hostile policy server (a raw HTTP server of the test),
each failing closed so a refusal shows as the operation's error:
- `strict` (namespace `hostile`): the default allow list;
- `named` (namespace `named`): the default kinds plus every hostile item allowed by name;
- `team-a` (namespace `team-a`): the default allow list, scoped to its namespace.
The policy answers every call with the reply the test sets. Each hostile value is refused by
`strict` (the error names the webhook and the item) and accepted by `named` (the container gets
it): the checker fails on the mutated input both ways. The control API's POST /v1/updates runs
the same checks with `updates.allow`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from bridge.proto.nri import api_pb2 as api
from bridge.simulator import EventResult, SimulatedRuntime
from bridge.simulator.cri_server import serve_cri
from tests.hardening.policy_http import HttpRequest, RawPolicy, json_reply
from tests.hardening.processes import BridgeProcess, bridge_process
from tests.integration.harness import pod_and_container

pytestmark = [pytest.mark.processes, pytest.mark.timeout(90)]

TIB = 1 << 40
NODE_2MB_PAGES = 512  # the fake node: 512 x 2 MiB = 1 GiB of 2MB hugepages
NODE_2MB_BYTES = NODE_2MB_PAGES * 2 * 1024 * 1024
HOSTILE_ANNOTATIONS = ("run.oci.keep_original_groups", "io.katacontainers.config.hypervisor.path",
                       "io.kubernetes.cri.untrusted-workload")
HOSTILE_ENV = ("LD_PRELOAD", "HTTPS_PROXY")
HOSTILE_UNIFIED = {"cgroup.procs": "1", "cgroup.subtree_control": "-memory"}
NAMED_ALLOW = [
    "resources", "env", "annotations", "rdt_class", "blockio_class", "oom_score_adj",
    *(f"annotations:{key}" for key in HOSTILE_ANNOTATIONS),
    *(f"env:{name}" for name in HOSTILE_ENV),
    *(f"unified:{key}" for key in HOSTILE_UNIFIED),
    "limits:oom_score_adj", "limits:pids", "limits:hugepages",
]
# What POST /v1/updates may change here: the default kinds plus one named item and one bound.
CONTROL_ALLOW = ["resources", "rdt_class", "blockio_class", "unified:cgroup.subtree_control",
                 "limits:pids"]


def bridge_config(policy_sock: Path, sysfs: Path, cri_socket: Path | None,
                  ) -> dict[str, Any]:
    common = {"url": f"unix://{policy_sock}/v1/policies/hostile",
              "events": ["CreateContainer", "UpdateContainer"], "timeout": "1s",
              "failure_policy": "Fail", "circuit_breaker": {"failure_threshold": 1000}}
    return {
        "webhooks": [
            {"name": "strict", "namespaces": ["hostile"], **common},
            {"name": "named", "namespaces": ["named"], "allow": NAMED_ALLOW, **common},
            {"name": "team-a", "namespaces": ["team-a"], **common},
        ],
        "node": {"sysfs_root": str(sysfs)},
        "updates": {"allow": CONTROL_ALLOW,
                    **({"cri_socket": str(cri_socket)} if cri_socket is not None else {})},
    }


def fake_sysfs(root: Path) -> Path:
    pages = root / "kernel" / "mm" / "hugepages" / "hugepages-2048kB"
    pages.mkdir(parents=True)
    (pages / "nr_hugepages").write_text(f"{NODE_2MB_PAGES}\n")
    return root


@dataclass
class Stack:
    runtime: SimulatedRuntime
    bridge: BridgeProcess
    reply: dict[str, Any] = field(default_factory=dict)
    serial: int = 0

    def container(self, namespace: str, pids: int | None = None,
                  ) -> tuple[api.PodSandbox, api.Container]:
        """A fresh pod of its own in `namespace` and its container (kubelet's oom_score_adj
        500: Burstable), with a pids limit if given."""
        self.serial += 1
        pod, container = pod_and_container(f"c{self.serial}", namespace)
        pod.id = f"{self.serial:08x}" + pod.id[8:]
        pod.name = pod.uid = f"{namespace}-pod-{self.serial}"
        container.pod_sandbox_id = pod.id
        if pids is not None:
            container.linux.resources.pids.limit = pids
        return pod, container

    async def create(self, namespace: str, reply: dict[str, Any], pids: int | None = None,
                     ) -> EventResult:
        """One CreateContainer in `namespace`, the policy answering `reply`."""
        self.reply.clear()
        self.reply.update(reply)
        pod, container = self.container(namespace, pids)
        sandbox = await self.runtime.run_event("RunPodSandbox", pod)
        assert sandbox.ok, sandbox.error
        return await self.runtime.create_container(pod, container)

    async def post_updates(self, updates: list[dict[str, Any]]) -> httpx.Response:
        transport = httpx.AsyncHTTPTransport(uds=str(self.bridge.control_sock))
        async with httpx.AsyncClient(transport=transport, base_url="http://bridge",
                                     timeout=10) as client:
            return await client.post("/v1/updates", json={"update": updates})

    def failures(self, webhook: str) -> list[dict[str, Any]]:
        return [line for line in self.bridge.json_lines()
                if line.get("msg") == "webhook call failed" and line.get("webhook") == webhook]


@contextlib.asynccontextmanager
async def stack(workdir: Path) -> AsyncIterator[Stack]:
    policy_sock, nri_sock = workdir / "policy.sock", workdir / "nri.sock"
    reply: dict[str, Any] = {}

    def answer(request: HttpRequest) -> Any:
        return reply

    policy = RawPolicy(json_reply(answer))
    await policy.start_unix(policy_sock)
    runtime = serve_cri(SimulatedRuntime(nri_sock, "containerd-2.1.9", request_timeout_s=3.0),
                        workdir / "cri.sock")
    await runtime.start()
    config = bridge_config(policy_sock, fake_sysfs(workdir / "sys"), runtime.cri_socket)
    try:
        async with bridge_process(workdir, nri_sock, config=config) as bridge:
            await runtime.wait_plugin(20)
            yield Stack(runtime, bridge, reply)
            assert runtime.closed_plugins == [] and runtime.lost_plugins == []
            assert bridge.running
    finally:
        await runtime.stop()
        await policy.aclose()


def refused(result: EventResult, *names: str) -> str:
    assert not result.ok, "the hostile reply was applied"
    error = result.error or ""
    assert 'webhook "strict" failed (disallowed)' in error, error
    for name in names:
        assert name in error, (name, error)
    return error


def applied(result: EventResult) -> api.Container:
    assert result.ok, result.error
    assert result.container is not None
    return result.container


def env_of(container: api.Container) -> dict[str, str]:
    return dict(item.split("=", 1) for item in container.env)


async def test_core_cgroup_files_in_unified_are_refused_unless_named(workdir: Path) -> None:
    reply = {"adjust": {"linux": {"resources": {"unified": HOSTILE_UNIFIED}}}}
    async with stack(workdir) as s:
        refused(await s.create("hostile", reply), "cgroup.procs", "unified:cgroup.procs")
        # One key alone is refused too (not only the pair), and a controller's file is fine.
        alone = {"adjust": {"linux": {"resources": {"unified": {
            "cgroup.subtree_control": "-memory"}}}}}
        refused(await s.create("hostile", alone), "cgroup.subtree_control")
        fine = {"adjust": {"linux": {"resources": {"unified": {"memory.high": "1073741824"}}}}}
        assert applied(await s.create("hostile", fine)).linux.resources.unified == {
            "memory.high": "1073741824"}
        named = applied(await s.create("named", reply))
        assert dict(named.linux.resources.unified) == HOSTILE_UNIFIED


@pytest.mark.parametrize("key", HOSTILE_ANNOTATIONS)
async def test_runtime_annotations_are_refused_unless_named(workdir: Path, key: str) -> None:
    reply = {"adjust": {"annotations": {key: "true"}}}
    async with stack(workdir) as s:
        refused(await s.create("hostile", reply), key, f"annotations:{key}")
        # A removal of the key is refused too; an annotation of the policy's own is fine.
        refused(await s.create("hostile", {"adjust": {"remove": {"annotations": [key]}}}), key)
        own = {"adjust": {"annotations": {"policy.example.com/decided": "yes"}}}
        assert applied(await s.create("hostile", own)).annotations[
            "policy.example.com/decided"] == "yes"
        assert applied(await s.create("named", reply)).annotations[key] == "true"


@pytest.mark.parametrize("name", HOSTILE_ENV)
async def test_loader_and_proxy_env_is_refused_unless_named(workdir: Path, name: str) -> None:
    value = "/tmp/evil.so" if name == "LD_PRELOAD" else "http://evil.example:3128"
    reply = {"adjust": {"env": [{"key": name, "value": value}]}}
    async with stack(workdir) as s:
        refused(await s.create("hostile", reply), name, f"env:{name}")
        ok = {"adjust": {"env": [{"key": "APP_MODE", "value": "fast"}]}}
        assert env_of(applied(await s.create("hostile", ok)))["APP_MODE"] == "fast"
        assert env_of(applied(await s.create("named", reply)))[name] == value


async def test_oom_score_adj_stays_inside_the_qos_class(workdir: Path) -> None:
    reply = {"adjust": {"linux": {"oom_score_adj": -1000}}}
    async with stack(workdir) as s:
        # kubelet gave the container 500 (Burstable: 3..999).
        refused(await s.create("hostile", reply), "-1000", "limits:oom_score_adj")
        refused(await s.create("hostile", {"adjust": {"linux": {"oom_score_adj": 2}}}), "2")
        floor = applied(await s.create("hostile", {"adjust": {"linux": {"oom_score_adj": 3}}}))
        assert floor.linux.oom_score_adj.value == 3
        assert applied(await s.create("named", reply)).linux.oom_score_adj.value == -1000


async def test_pids_limit_is_never_removed(workdir: Path) -> None:
    reply = {"adjust": {"linux": {"resources": {"pids": {"limit": -1}}}}}
    async with stack(workdir) as s:
        refused(await s.create("hostile", reply, pids=1024), "pids", "limits:pids")
        lower = {"adjust": {"linux": {"resources": {"pids": {"limit": 512}}}}}
        assert applied(await s.create("hostile", lower, pids=1024)
                       ).linux.resources.pids.limit == 512
        assert applied(await s.create("named", reply, pids=1024)
                       ).linux.resources.pids.limit == -1


async def test_hugepage_limit_is_bounded_by_the_node(workdir: Path) -> None:
    def hugepages(limit: int) -> dict[str, Any]:
        return {"adjust": {"linux": {"resources": {"hugepage_limits": [
            {"page_size": "2MB", "limit": limit}]}}}}

    async with stack(workdir) as s:
        refused(await s.create("hostile", hugepages(TIB)), str(TIB), "limits:hugepages")
        refused(await s.create("hostile", hugepages(NODE_2MB_BYTES + 1)), "2MB")
        inside = applied(await s.create("hostile", hugepages(NODE_2MB_BYTES)))
        assert [(h.page_size, h.limit) for h in inside.linux.resources.hugepage_limits] == [
            ("2MB", NODE_2MB_BYTES)]
        named = applied(await s.create("named", hugepages(TIB)))
        assert [h.limit for h in named.linux.resources.hugepage_limits] == [TIB]


async def test_a_scoped_webhook_cannot_update_or_evict_outside_its_scope(
        workdir: Path) -> None:
    async with stack(workdir) as s:
        # A prod container (no webhook selects prod) and a team-a one, known to the bridge.
        prod = await s.create("prod", {})
        assert prod.ok and prod.container is not None
        prod_id = prod.container.id
        own = await s.create("team-a", {})
        assert own.ok and own.container is not None
        own_id = own.container.id

        def update(cid: str) -> dict[str, Any]:
            return {"update": [{"container_id": cid,
                                "linux": {"resources": {"cpu": {"shares": 2}}}}]}

        result = await s.create("team-a", update(prod_id))
        assert not result.ok, "the team-a webhook changed a prod container"
        assert 'webhook "team-a" failed (disallowed)' in (result.error or ""), result.error
        assert s.runtime.state.containers[prod_id].linux.resources.cpu.shares.value != 2
        line = s.failures("team-a")[-1]
        assert prod_id[:16] in line["reason"] and "'prod'" in line["reason"], line
        assert "outside the webhook's selector" in line["reason"], line

        result = await s.create("team-a", {"evict": [{"container_id": prod_id,
                                                      "reason": "make room"}]})
        assert not result.ok and 'webhook "team-a" failed (disallowed)' in (result.error or "")
        assert "'prod'" in s.failures("team-a")[-1]["reason"]

        unknown = await s.create("team-a", {"evict": [{"container_id": "f" * 64}]})
        assert not unknown.ok and "unknown container" in (unknown.error or ""), unknown.error

        # The same update and eviction of a team-a container are accepted.
        mine = await s.create("team-a", update(own_id))
        assert mine.ok, mine.error
        assert [u.container_id for u in mine.updates] == [own_id]
        assert s.runtime.state.containers[own_id].linux.resources.cpu.shares.value == 2
        evicts = await s.create("team-a", {"evict": [{"container_id": own_id}]})
        assert evicts.ok, evicts.error
        await s.bridge.wait_log("eviction requested (NRI runtimes drop evictions; not "
                                "forwarded)")


async def test_control_api_updates_get_the_same_checks(workdir: Path) -> None:
    async with stack(workdir) as s:
        made = await s.create("prod", {}, pids=1024)
        assert made.ok and made.container is not None
        cid = made.container.id

        def unified(keys: dict[str, str]) -> list[dict[str, Any]]:
            return [{"container_id": cid, "linux": {"resources": {"unified": keys}}}]

        answer = await s.post_updates(unified(HOSTILE_UNIFIED))
        assert answer.status_code == 400, answer.text
        assert "cgroup.procs" in answer.json()["error"], answer.text
        hugepages = [{"container_id": cid, "linux": {"resources": {"hugepage_limits": [
            {"page_size": "2MB", "limit": TIB}]}}}]
        answer = await s.post_updates(hugepages)
        assert answer.status_code == 400 and "limits:hugepages" in answer.json()["error"]
        assert s.runtime.state.containers[cid].linux.resources.unified == {}

        # Named in updates.allow: cgroup.subtree_control alone, and removing the pids limit.
        answer = await s.post_updates(unified({"cgroup.subtree_control": "-memory"}))
        assert answer.status_code == 200, answer.text
        assert json.loads(answer.text)["failed"] == [], answer.text
        assert s.runtime.state.containers[cid].linux.resources.unified == {
            "cgroup.subtree_control": "-memory"}
        # Accepted by the bridge (CRI cannot carry pids: the answer says it was dropped).
        pids = [{"container_id": cid, "linux": {"resources": {"pids": {"limit": -1}}}}]
        answer = await s.post_updates(pids)
        assert answer.status_code == 200, answer.text
        assert answer.json()["failed"] == [], answer.text
