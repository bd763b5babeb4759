"""The resync fetches the bridge's state again when a request reached the server meanwhile, on a
server whose policies do not read the node view too (then nothing is folded: the check counts
evaluations, not folds)."""

from __future__ import annotations

import httpx

from policy_server import Event, EventName, Policy
from policy_server.bridge_link.control_client import BridgeControl
from policy_server.service import PolicyServer, ServerOptions
from tests.policy_server.factory import container, envelope, evaluate_json, pod


def synchronizing() -> Policy[None]:
    policy = Policy("sync")

    @policy.on(EventName.SYNCHRONIZE, EventName.CREATE_CONTAINER)
    def answer(event: Event) -> None:
        return None

    return policy


async def test_a_request_during_the_state_fetch_makes_the_resync_fetch_again() -> None:
    fetches: list[int] = []
    server: PolicyServer

    def bridge(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/readyz":
            return httpx.Response(200, json={"ready": True})
        assert request.url.path == "/v1/state"
        fetches.append(server.engine.evaluations)
        if len(fetches) == 1:  # an event arrives while the first answer is on its way
            evaluate_json(server.engine,
                "sync", envelope("CreateContainer", pod=pod(), container=container())
            )
        return httpx.Response(200, json={"pods": [], "containers": []})

    control = BridgeControl("http://bridge", transport=httpx.MockTransport(bridge))
    server = PolicyServer(ServerOptions(default_policies=False), [synchronizing()], bridge=control)
    assert not server.engine.folds
    assert await server.resync.run_pass()
    assert fetches == [0, 1]
    await server.aclose()
