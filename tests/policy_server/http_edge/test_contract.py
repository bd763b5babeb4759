"""Contract tests: requests we accept and replies we send, against bridge.contract and the schemas.

Every example request (the contract's and ours) validates; every reply the server gives for
them validates against the reply model and the generated per-event JSON Schema.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import msgspec
import pytest

from bridge.contract import WebhookReply
from bridge.contract.catalogue import REPLY_KEYS as CONTRACT_REPLY_KEYS
from bridge.contract.request_structs import WebhookRequest
from policy_server.assemble import Assembly, assemble
from policy_server.engine import evaluate as engine
from policy_server.service import ServerOptions
from tests.json_schemas import validate

ROOT = Path(__file__).parents[3]
SCHEMAS = ROOT / "schemas" / "webhook" / "events"
REQUESTS = sorted((ROOT / "schemas/webhook/examples").glob("*.request.json")) + sorted(
    (ROOT / "examples/requests").glob("*.json")
)


def test_our_reply_table_is_the_contract() -> None:
    # The engine checks replies against the catalogue's own table
    # (tests/bridge/contract/test_catalogue.py proves every event list is derived from the
    # catalogue). The engine's binding is read from its namespace: it imports the name, it does
    # not re-export it.
    assert vars(engine)["REPLY_KEYS"] is CONTRACT_REPLY_KEYS


@pytest.mark.parametrize("path", REQUESTS, ids=lambda p: p.name)
def test_example_requests_validate(path: Path) -> None:
    body = json.loads(path.read_text())
    msgspec.json.decode(json.dumps(body), type=WebhookRequest)  # the declaration takes it
    validate(body, SCHEMAS / f"{body['event']}.request.schema.json")


@pytest.fixture
def assembly() -> Assembly:
    return assemble(ServerOptions(rules_path=ROOT / "examples/koordinator-rules.yaml",
                                  policy_modules=(str(ROOT / "examples/label_env_policy.py"),)))


@pytest.mark.parametrize("path", REQUESTS, ids=lambda p: p.name)
async def test_every_reply_validates(assembly: Assembly, path: Path) -> None:
    body = json.loads(path.read_text())  # noqa: ASYNC240 - a small fixture file
    transport = httpx.ASGITransport(app=assembly.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://p") as client:
        for policy in ("koordinator-qos", "label-env"):
            response = await client.post(f"/v1/policies/{policy}", json=body)
            assert response.status_code == 200, response.text
            reply = response.json()
            WebhookReply.model_validate(reply)
            validate(reply, SCHEMAS / f"{body['event']}.reply.schema.json")
            assert set(reply) <= set(CONTRACT_REPLY_KEYS[body["event"]])
