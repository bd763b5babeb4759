"""A policy service that misbehaves on purpose, for the soak test (benchmarks/soak.py).

Every request draws one fate from a seeded random generator:

| fate      | what the bridge gets                                        | bridge outcome      |
|-----------|-------------------------------------------------------------|---------------------|
| ok        | CreateContainer: one env var and cpu.shares; others `{}`     | ok / no_change      |
| error     | HTTP 500                                                     | http_status         |
| slow      | the ok reply, after `--slow-s` (longer than the timeout)     | timeout             |
| garbage   | 200 with a body that is not JSON                             | invalid_json        |
| schema    | 200 with JSON that is not a reply (`env` is a string)        | schema_violation    |
| truncated | 200 announcing 64 bytes, connection closed after 8           | transport_error     |

    .venv/bin/python benchmarks/chaos_policy.py --uds /tmp/chaos.sock --error 0.02 --slow 0.01

Rates are fractions of all requests; the rest are `ok`. Runs until SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
from typing import Any

import uvicorn
from starlette.types import Receive, Scope, Send

FATES = ("error", "slow", "garbage", "schema", "truncated")
OK_CREATE = json.dumps({"adjust": {"env": [{"key": "SOAK", "value": "1"}],
                                   "linux": {"resources": {"cpu": {"shares": 512}}}}}).encode()
NO_CHANGE = b"{}"
GARBAGE = b"\x00<html>not json{"
SCHEMA = json.dumps({"adjust": {"env": "SOAK=1"}}).encode()


class ChaosPolicy:
    """A bare ASGI app: no framework between the fault and the wire."""

    def __init__(self, rates: dict[str, float], slow_s: float, seed: int) -> None:
        self.rates = rates
        self.slow_s = slow_s
        self.random = random.Random(seed)
        self.counts: dict[str, int] = {}

    def fate(self) -> str:
        draw = self.random.random()
        for name in FATES:
            draw -= self.rates.get(name, 0.0)
            if draw < 0:
                return name
        return "ok"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        fate = self.fate()
        self.counts[fate] = self.counts.get(fate, 0) + 1
        if fate == "slow":
            await asyncio.sleep(self.slow_s)
        if fate == "error":
            await _reply(send, 500, b'{"error": "injected"}')
        elif fate == "garbage":
            await _reply(send, 200, GARBAGE)
        elif fate == "schema":
            await _reply(send, 200, SCHEMA)
        elif fate == "truncated":
            await send({"type": "http.response.start", "status": 200, "headers": [
                (b"content-type", b"application/json"), (b"content-length", b"64")]})
            await send({"type": "http.response.body", "body": b'{"adjust"', "more_body": True})
            raise ConnectionAbortedError("injected: reply cut short")  # uvicorn drops the conn
        else:
            event = _event_of(body)
            await _reply(send, 200, OK_CREATE if event == "CreateContainer" else NO_CHANGE)


def _event_of(body: bytes) -> str:
    try:
        doc: Any = json.loads(body)
    except ValueError:
        return ""
    return str(doc.get("event", "")) if isinstance(doc, dict) else ""


async def _reply(send: Send, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--uds", required=True, help="Unix socket to listen on")
    for fate in FATES:
        parser.add_argument(f"--{fate}", type=float, default=0.0, metavar="RATE")
    parser.add_argument("--slow-s", type=float, default=0.3, help="delay of a slow reply")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rates = {fate: getattr(args, fate) for fate in FATES}
    with contextlib.suppress(FileNotFoundError):
        os.unlink(args.uds)
    uvicorn.run(ChaosPolicy(rates, args.slow_s, args.seed), uds=args.uds, log_level="critical",
                access_log=False, lifespan="off")


if __name__ == "__main__":
    main()
