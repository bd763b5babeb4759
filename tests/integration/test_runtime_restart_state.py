"""Pods removed while the runtime was restarting leave the bridge's and the policy server's view.

The Synchronize a restarted runtime sends after re-registration lists every pod and container
that exists; it replaces what the bridge knew (GET /v1/state) and, through the bridge's
Synchronize webhook, the policy server's node view (docs/operations.md, runtime restart).
Real parts: the simulated runtime over its Unix socket, the bridge's runner and control API, the
policy server's app on its Unix socket.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from bridge.simulator.runtime import SimulatedRuntime
from bridge.simulator.synthetic import synthetic_state
from policy_server.assemble import assemble
from policy_server.service import ServerOptions
from tests.integration.harness import running_bridge, short_tmpdir, webhook
from tests.policy_server.factory import node_reader
from tests.policy_server.servers import serve_on_uds

pytestmark = pytest.mark.timeout(90)

# The events the shipped bridge config sends the policy server (deploy/systemd/config.yaml).
SHIPPED_EVENTS = ["RunPodSandbox", "CreateContainer", "UpdateContainer", "RemoveContainer",
                  "RemovePodSandbox", "Synchronize"]
# A generous budget: under load the Synchronize webhook still finishes before the answer.
REQUEST_TIMEOUT_S = 30.0


def _ids(objects: list[dict[str, Any]]) -> set[str]:
    return {o["id"] for o in objects}


async def test_pods_removed_while_the_runtime_was_down_are_gone_after_the_resync() -> None:
    pods, containers = synthetic_state(2, 4)
    kept, removed = pods
    kept_containers = {c.id for c in containers if c.pod_sandbox_id == kept.id}
    removed_containers = {c.id for c in containers if c.pod_sandbox_id == removed.id}
    assert kept_containers and removed_containers
    with short_tmpdir() as workdir:
        runtime = SimulatedRuntime(workdir / "nri.sock", "containerd-2.1.9",
                                   request_timeout_s=REQUEST_TIMEOUT_S)
        runtime.state.seed(pods, containers)
        await runtime.start()
        # node_reader: the view the test reads is kept only when a policy reads it.
        assembly = assemble(ServerOptions(bridge_control=f"unix://{workdir}/control.sock"),
                            extra_policies=[node_reader()])
        server = assembly.server
        hook = webhook(workdir / "policy.sock", events=SHIPPED_EVENTS,
                       url=f"unix://{workdir}/policy.sock/v1/policies/koordinator-qos",
                       timeout="25s")
        try:
            async with serve_on_uds(assembly.app, workdir / "policy.sock"), \
                    running_bridge(runtime, [hook], workdir) as bridge, \
                    httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(
                        uds=str(bridge.control_sock)), base_url="http://bridge",
                        timeout=30) as control:
                before = (await control.get("/v1/state")).json()
                assert _ids(before["pods"]) == {kept.id, removed.id}
                assert set(server.engine.node.pods) == {kept.id, removed.id}
                first = bridge.runner.session

                await runtime.stop()  # the runtime goes away ...
                # ... and comes back without the pod (and its containers) removed meanwhile.
                del runtime.state.pods[removed.id]
                for gone in removed_containers:
                    del runtime.state.containers[gone]
                await runtime.start()
                await runtime.wait_plugin(60)  # re-registered, configured, synchronized
                assert bridge.runner.session is not first

                after = (await control.get("/v1/state")).json()
                assert _ids(after["pods"]) == {kept.id}
                assert _ids(after["containers"]) == kept_containers
                # The policy server got the bridge's Synchronize: its view is replaced too.
                assert set(server.engine.node.pods) == {kept.id}
                assert set(server.engine.node.containers) == kept_containers
        finally:
            await runtime.stop()
