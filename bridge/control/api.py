"""The control API as a Starlette app; everything it touches comes in as `ControlDeps`.

Routes:
- `POST /v1/updates` `{"update": [ContainerUpdate JSON]}` → `{"failed": [...]}` (and
  `"dropped": [{"container_id", "fields"}]` when the route cannot carry some fields):
  validated (resources only, known container ids, cpuset syntax) and then sent through the
  runner's update queue, never from inside an event handler, by the route the runtime is safe
  with (NRI UpdateContainers, or CRI UpdateContainerResources where that deadlocks the runtime:
  bridge.nri.update_routes);
- `GET /v1/state` → `{"pods": [...], "containers": [...]}` in webhook JSON form; environment
  values are replaced by `<redacted>` (names kept) unless the listener's guard marked the
  peer as a reader (bridge.listening.http_guard: root over the Unix socket by default);
- `GET /healthz` (the loop answers), `GET /readyz` (registered and serving: 200, else 503;
  the body `{"ready": bool, "stuck_calls": [{"call", "detail", "seconds"}]}` also lists our
  calls to the runtime that have not returned for a few seconds, bridge.call_watch);
- `GET /metrics` (Prometheus text format).

`create_metrics_app` serves `GET /metrics` alone: the app behind
`--metrics-address`, a listener Prometheus may reach from the network.

The app never imports the webhook package or the runner: the composition
root (bridge.app) hands in callables.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bridge.call_watch import StuckCall
from bridge.contract.convert import to_json
from bridge.errors import BridgeError
from bridge.listening.http_guard import ENV_READER_KEY
from bridge.metrics import CONTENT_TYPE, BridgeMetrics
from bridge.nri.updates import UpdateOutcome
from bridge.proto.nri import api_pb2 as api

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1 << 20
MAX_UPDATES = 10_000
SEND_TIMEOUT_S = 35.0  # one delivery is bounded at 30 s; queueing on top
# Characters of a refusal reason in the log (it can quote keys from the body; even
# escaped as JSON at 12 bytes a character, the line stays small).
LOG_REASON_CHARS = 256
# The dropped-fields metric's event and webhook labels for what the control API could not carry.
CONTROL_EVENT = "UnsolicitedUpdate"
CONTROL_SOURCE = "control-api"
REDACTED = "<redacted>"


@dataclass(frozen=True, slots=True)
class ControlDeps:
    ready: Callable[[], bool]
    pods: Callable[[], Sequence[api.PodSandbox]]
    containers: Callable[[], Sequence[api.Container]]
    # JSON list -> checked updates; raises BridgeError with a path-naming message.
    parse_updates: Callable[[Any], Sequence[api.ContainerUpdate]]
    # Queue and wait for the runtime's answer: what it refused, took and could not carry.
    send_updates: Callable[[list[api.ContainerUpdate]], Awaitable[UpdateOutcome]]
    metrics: BridgeMetrics
    # Our calls to the runtime that have not returned past the threshold (bridge.call_watch).
    stuck_calls: Callable[[], Sequence[StuckCall]]


def redact_env(env: Sequence[str]) -> list[str]:
    """`NAME=value` -> `NAME=<redacted>`: the names stay, no value leaves."""
    return [item.partition("=")[0] + ("=" + REDACTED if "=" in item else "") for item in env]


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def _read_capped(request: Request) -> bytes | None:
    """The body, or None once it passes MAX_BODY_BYTES (a chunked body has no
    content-length to refuse up front; stop reading instead of buffering it all)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def create_control_app(deps: ControlDeps) -> Starlette:
    async def post_updates(request: Request) -> Response:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
            return _error(413, f"body larger than {MAX_BODY_BYTES} bytes")
        body = await _read_capped(request)
        if body is None:
            return _error(413, f"body larger than {MAX_BODY_BYTES} bytes")
        try:
            data = json.loads(body)
        except (UnicodeDecodeError, ValueError) as exc:
            return _error(400, f"body is not JSON: {exc}")
        except RecursionError:
            return _error(400, "body is not JSON: nested too deeply")
        if not isinstance(data, dict):
            return _error(400, 'expected {"update": [ContainerUpdate, ...]}')
        unknown = sorted(set(data) - {"update"})
        if unknown:
            return _error(400, f"{unknown[0][:80]}: unknown field; expected "
                          '{"update": [ContainerUpdate, ...]}')
        items = data.get("update") or []
        if isinstance(items, list) and len(items) > MAX_UPDATES:
            return _error(413, f"more than {MAX_UPDATES} updates")
        try:
            updates = list(deps.parse_updates(items))
        except BridgeError as exc:
            deps.metrics.unsolicited.labels("invalid").inc(len(items) if isinstance(items, list)
                                                           else 1)
            log.warning("refused unsolicited updates",
                        extra={"reason": str(exc)[:LOG_REASON_CHARS]})
            return _error(400, str(exc))
        if not updates:
            return JSONResponse({"failed": []})
        if not deps.ready():
            return _error(503, "not connected to the runtime")
        try:
            async with asyncio.timeout(SEND_TIMEOUT_S):
                outcome = await deps.send_updates(updates)
        except TimeoutError:
            deps.metrics.unsolicited.labels("timeout").inc(len(updates))
            return _error(504, f"runtime did not answer within {SEND_TIMEOUT_S:.0f}s")
        except BridgeError as exc:
            deps.metrics.unsolicited.labels("error").inc(len(updates))
            return _error(502, f"container updates failed: {exc}")
        failed = outcome.failed
        deps.metrics.unsolicited.labels("sent").inc(len(updates) - len(failed))
        deps.metrics.unsolicited.labels("failed").inc(len(failed))
        for fields in outcome.dropped.values():
            for name in fields:
                deps.metrics.dropped_fields.labels(CONTROL_EVENT, CONTROL_SOURCE, name).inc()
        log.info("unsolicited updates sent", extra={
            "updates": len(updates), "failed": len(failed), "route": outcome.route})
        answer: dict[str, Any] = {"failed": [to_json(u) for u in failed]}
        if outcome.dropped:
            answer["dropped"] = [{"container_id": cid, "fields": list(fields)}
                                 for cid, fields in outcome.dropped.items()]
        return JSONResponse(answer)

    async def get_state(request: Request) -> Response:
        # orjson: the reconciler fetches this every 10 s, a body of ~1 MiB at 1,000 pods;
        # json.dumps was a third of the bridge's CPU for it (docs/performance.md, node scale).
        containers = [to_json(c) for c in deps.containers()]
        if not request.scope.get(ENV_READER_KEY, False):
            for container in containers:
                if "env" in container:
                    container["env"] = redact_env(container["env"])
        body = orjson.dumps({"pods": [to_json(p) for p in deps.pods()],
                             "containers": containers})
        return Response(body, media_type="application/json")

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> Response:
        ready = deps.ready()
        stuck = [{"call": c.call, "detail": c.detail, "seconds": c.seconds}
                 for c in deps.stuck_calls()]
        return JSONResponse({"ready": ready, "stuck_calls": stuck},
                            status_code=200 if ready else 503)

    async def metrics(request: Request) -> Response:
        return Response(deps.metrics.exposition(), media_type=CONTENT_TYPE)

    return Starlette(routes=[
        Route("/v1/updates", post_updates, methods=["POST"]),
        Route("/v1/state", get_state, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ])


def create_bridge_metrics_app(metrics: BridgeMetrics) -> Starlette:
    """`GET /metrics` and nothing else: updates and state stay on the control listeners."""

    async def exposition(request: Request) -> Response:
        return Response(metrics.exposition(), media_type=CONTENT_TYPE)

    return Starlette(routes=[Route("/metrics", exposition, methods=["GET"])])
