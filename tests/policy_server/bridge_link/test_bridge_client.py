"""Contract tests of the bridge control client (respx) and the errors it maps."""

from __future__ import annotations

import httpx
import pytest
import respx

from policy_server.bridge_link.control_client import BridgeControl, BridgeTrust
from policy_server.exceptions import BridgeControlError

URL = "http://127.0.0.1:9999"
# Plain http is refused without the opt-in (tests/policy_server/bridge_link/test_bridge_trust.py).
INSECURE = BridgeTrust(insecure=True)


@respx.mock
async def test_state_and_push() -> None:
    respx.get(f"{URL}/v1/state").respond(json={"pods": [{"id": "p"}], "containers": []})
    push = respx.post(f"{URL}/v1/updates").respond(json={"failed": [{"container_id": "c"}]})
    bridge = BridgeControl(URL + "/", trust=INSECURE)
    state = await bridge.state()
    assert state.pods == [{"id": "p"}] and state.containers == []
    failed = await bridge.push_updates([{"container_id": "c"}])
    assert failed == [{"container_id": "c"}]
    assert push.calls.last.request.read() == b'{"update":[{"container_id":"c"}]}'
    await bridge.aclose()


@pytest.mark.parametrize(
    ("response", "fragment"),
    [
        (httpx.Response(503, text="draining"), "HTTP 503: draining"),
        (httpx.Response(200, text="<html>"), "not JSON"),
        (httpx.Response(200, json=[1]), "not a JSON object"),
        (httpx.Response(200, json={"pods": {"id": "p"}}), "'pods' is not a list of objects"),
    ],
)
@respx.mock
async def test_bad_state_replies(response: httpx.Response, fragment: str) -> None:
    respx.get(f"{URL}/v1/state").mock(return_value=response)
    with pytest.raises(BridgeControlError, match=fragment):
        await BridgeControl(URL, trust=INSECURE).state()


@respx.mock
async def test_connection_errors_are_mapped() -> None:
    respx.get(f"{URL}/v1/state").mock(side_effect=httpx.ConnectError("refused"))
    with pytest.raises(BridgeControlError, match="ConnectError"):
        await BridgeControl(URL, trust=INSECURE).state()


@respx.mock
async def test_bad_failed_list() -> None:
    respx.post(f"{URL}/v1/updates").respond(json={"failed": "c1"})
    with pytest.raises(BridgeControlError, match="'failed' is not a list"):
        await BridgeControl(URL, trust=INSECURE).push_updates([])


@pytest.mark.parametrize("url", ["unix://relative.sock", "ftp://x", "bridge:80"])
def test_bad_urls(url: str) -> None:
    with pytest.raises(BridgeControlError, match="bridge control URL"):
        BridgeControl(url)
