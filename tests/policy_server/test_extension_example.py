"""docs/policy-server.md#extending-a-policy, end to end: the example policy with a background task
and a node effect (examples/memory_cap_policy.py) in a real ``PolicyServer`` behind the real ASGI
app, with a fake bridge and a cgroup v1 tree in a temporary directory. Its own task polls the
caps file; a change recomputes every known pod; the node reconciler writes the pod cgroup file
and puts back a value reset behind its back; the state page shows the caps in force."""

from __future__ import annotations

import asyncio
import importlib.util
import os
from pathlib import Path
from types import ModuleType

import httpx

from policy_server.assemble import assemble
from policy_server.bridge_link.control_client import BridgeControl
from policy_server.node.execution import ExecutorMode
from policy_server.service import ServerOptions
from tests.policy_server.factory import pod
from tests.policy_server.node.test_node_reconciler import V1_UNLIMITED, FakeBridge, cgroup
from tests.waiting import until

ROOT = Path(__file__).parents[2]
PARENT = "/kubepods/burstable/podu1"
GIB = 1 << 30


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "memory_cap_policy", ROOT / "examples" / "memory_cap_policy.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rewrite(path: Path, text: str) -> None:
    """New content with a later mtime (a same-second rewrite must still count as a change)."""
    path.write_text(text)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


async def test_memory_cap_example_end_to_end(tmp_path: Path) -> None:
    caps = tmp_path / "caps.yaml"
    caps.write_text(f"default: {GIB}\n")
    cg = tmp_path / "cgroup"
    cgroup(cg, PARENT, cpu__shares="1024", memory__limit_in_bytes=V1_UNLIMITED)
    limit = cg / "memory" / PARENT.lstrip("/") / "memory.limit_in_bytes"
    fake = FakeBridge([pod(pod_id="p1", uid="u1", cgroup_parent=PARENT)], [])
    bridge = BridgeControl("http://bridge", transport=httpx.MockTransport(fake.handle))
    options = ServerOptions(
        default_policies=False, bridge_control="http://bridge", executor_mode=ExecutorMode.ON,
        cgroup_root=cg, rules_poll_interval_s=0.02, reconcile_interval_s=0.05)  # fmt: skip
    assembly = assemble(options, extra_policies=[load_example().build(caps)], bridge=bridge)
    server = assembly.server
    server.probe_node()
    assert server.reconciler is not None  # the reconcile hook put the policy under it

    def limit_is(value: int) -> bool:
        return limit.read_text().strip() == str(value)

    stop = asyncio.Event()
    background = asyncio.create_task(server.run_background(stop))
    try:
        await until(lambda: limit_is(GIB), what="the start-up pass writes the cap", timeout_s=10)
        rewrite(caps, f"default: {GIB // 2}\n")  # the policy's own task sees the change ...
        await until(lambda: limit_is(GIB // 2), what="the server re-applies the new cap",
                    timeout_s=10)
        limit.write_text(V1_UNLIMITED)  # someone resets the pod's limit
        await until(lambda: limit_is(GIB // 2), what="the next periodic pass fixes the limit",
                    timeout_s=10)
        rewrite(caps, "default: lots\n")  # invalid: the last good caps stay in force
        await until(
            lambda: 'policy_rules_last_load_valid 0.0' in server.metrics.render().decode(),
            what="the invalid caps file is reported", timeout_s=10)
        app = assembly.app
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://p") as client:  # fmt: skip
            state = (await client.get("/v1/policies/memory-cap/state")).json()
            missing = await client.get("/v1/policies/nope/state")
    finally:
        stop.set()
        await asyncio.wait_for(background, 10)
    assert state["caps"] == {"default": GIB // 2} and state["generation"] == 2
    assert state["file"] == str(caps) and "expected a positive number" in state["last_error"]
    assert missing.status_code == 404
    assert fake.pushed == []  # a node effect only: no container update went through the bridge
    metrics = server.metrics.render().decode()
    assert 'policy_reconcile_drift_fixed_total{level="pod"}' in metrics
    assert limit_is(GIB // 2)


def test_the_guide_shows_the_example_code() -> None:
    """docs/policy-server.md's snippet is the example module's code (comments aside)."""
    guide = (ROOT / "docs" / "policy-server.md").read_text()
    section = guide[guide.index("### End to end: a memory cap per namespace"):]
    snippet = section[section.index("```python\n") + 10:section.index("```\n", 10)]

    def code(line: str) -> str:
        return line.split("  #")[0].split("# fmt:")[0].strip()

    source = {code(line) for line in (ROOT / "examples" / "memory_cap_policy.py").read_text()
              .splitlines()}  # fmt: skip
    shown = [code(line) for line in snippet.splitlines() if code(line)]
    assert len(shown) > 20
    assert [line for line in shown if line not in source] == []
