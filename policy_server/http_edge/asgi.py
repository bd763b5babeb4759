"""The FastAPI application: HTTP routes onto ``PolicyServer``; no policy logic here.

Routes: ``POST /v1/policies/{name}`` (one webhook request, decoded by the server's one request
decoder; the reply encoded once from the policy's decision) is served by
``hot_route.HotRoute`` in front of the whole FastAPI app and only documented here: it appears in
``/openapi.json`` through a declaration that is never routed (``_documented``). FastAPI serves
``GET /v1/policies``, ``GET /v1/policies/{name}/state`` (a policy's state description, an SDK
extension point), ``GET /v1/rules`` (the state of the policy ``--rules`` configures, for
compatibility), ``GET /v1/state`` (node effects), ``GET /healthz``, ``GET /metrics``, OpenAPI
at ``/docs``. Bad bodies get 422: ``detail[].loc`` and ``msg`` are the request decoder's.
``create_metrics_app`` serves ``GET /metrics`` alone, for a listener Prometheus may reach
(``--metrics-address``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import msgspec
from fastapi import APIRouter, FastAPI, HTTPException, Request, Response
from fastapi.openapi.utils import get_openapi
from starlette.applications import Starlette
from starlette.routing import Route

from bridge.contract import WebhookReply
from bridge.contract.catalogue import EventName
from bridge.contract.request_structs import WebhookRequest
from policy_server.exceptions import UnknownPolicyError
from policy_server.http_edge.hot_route import HotRoute
from policy_server.sdk.extension import ConfigStatus
from policy_server.service import PolicyServer, policy_host
from policy_server.telemetry import CONTENT_TYPE

log = logging.getLogger(__name__)

VERSION = "0.1.0"
SHUTDOWN_TIMEOUT_S = 5.0
__all__ = ["create_app"]


def _describe_policies(server: PolicyServer) -> list[dict[str, Any]]:
    out = []
    for policy in server.registry:
        events = [e for e in EventName if e in policy.events]
        out.append(
            {
                "name": policy.name,
                "description": policy.description,
                "url": f"/v1/policies/{policy.name}",
                "events": [e.value for e in events],
                "handlers": {
                    e.value: [h.name for h in policy.handlers_for(e)]
                    for e in events
                    if policy.handlers_for(e)
                },
            }
        )
    return out


def create_app(server: PolicyServer) -> HotRoute:
    """The ASGI app for ``server``: ``HotRoute`` in front of the FastAPI app (its ``.app``),
    whose lifespan runs the policies' background tasks."""

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        stop = asyncio.Event()
        task = asyncio.create_task(server.run_background(stop), name="policy-server-background")
        try:
            yield
        finally:
            stop.set()
            try:
                await asyncio.wait_for(task, SHUTDOWN_TIMEOUT_S)
            except TimeoutError:
                log.error("background task did not stop within %ss", SHUTDOWN_TIMEOUT_S)
            await server.aclose()

    app = FastAPI(
        title="nri-policy-server",
        version=VERSION,
        description="Policies for nri-webhook-bridge as HTTP endpoints. POST one webhook "
        "request to /v1/policies/{name}; the reply says how to change the container.",
        lifespan=lifespan,
    )

    @app.get("/healthz", summary="Liveness and rules status")
    async def healthz() -> dict[str, Any]:
        status = policy_host.config_status(server.registry) or ConfigStatus()
        return {
            "status": "ok",
            "policies": [p.name for p in server.registry],
            "rules": status.to_json(),
            # Per policy that reads a configuration: its generation and a refused reload.
            "configs": {name: config.to_json()
                        for name, config in policy_host.config_statuses(server.registry).items()},
        }

    @app.get("/metrics", summary="Prometheus metrics")
    async def metrics() -> Response:
        return Response(server.metrics.render(), media_type=CONTENT_TYPE)

    @app.get("/v1/policies", summary="Policies served and the events each handles")
    async def policies() -> dict[str, Any]:
        return {"policies": _describe_policies(server)}

    @app.get("/v1/policies/{name}/state", summary="A policy's own state description")
    async def policy_state(name: str) -> dict[str, Any]:
        try:
            state = policy_host.policy_state(server.registry, name)
        except UnknownPolicyError:
            raise HTTPException(404, f"no policy named {name!r}") from None
        if state is None:
            raise HTTPException(404, f"policy {name!r} describes no state") from None
        return dict(state)

    @app.get("/v1/rules", summary="The rules in force of the policy --rules configures")
    async def rules() -> dict[str, Any]:
        state = policy_host.rules_state(server.registry)
        if state is None:
            raise HTTPException(404, "no policy configured by --rules is served")
        return dict(state)

    @app.get("/v1/state", summary="Which node effects take effect here, and the reconciler")
    async def state() -> dict[str, Any]:
        return {"node_effects": server.node_state()}

    documented = _documented()

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=[*app.routes, *documented.routes],
            )
            schemas = app.openapi_schema.setdefault("components", {}).setdefault("schemas", {})
            schemas.update(_request_components())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    # Outermost: FastAPI's own middleware (error pages, telemetry, body limit) is a visible
    # share of the server's CPU per webhook call (docs/performance.md#numbers-behind-the-code);
    # HotRoute answers for itself.
    return HotRoute(app, server)


# The request's components, named apart from the reply's (its Adjustment and Update are not
# the reply's): generated from the request's one declaration, as schemas/webhook/ is.
_REQUEST = "request."


def _request_components() -> dict[str, Any]:
    _, components = msgspec.json.schema_components(
        [WebhookRequest], ref_template=f"#/components/schemas/{_REQUEST}{{name}}")
    return {_REQUEST + name: schema for name, schema in components.items()}


def _documented() -> APIRouter:
    """``POST /v1/policies/{name}`` as the OpenAPI document shows it. These routes are never
    mounted: ``HotRoute`` answers the path before the FastAPI app sees it."""
    router = APIRouter()

    @router.post(
        "/v1/policies/{name}",
        summary="Evaluate one NRI event",
        response_model=None,
        openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
            "schema": {"$ref": f"#/components/schemas/{_REQUEST}WebhookRequest"}}}}},
        responses={
            200: {"model": WebhookReply, "description": "The policy's decision ({} = no change)"},
            404: {"description": "No such policy"},
            415: {"description": "The content type is not JSON"},
            422: {"description": "The body is not a valid webhook request; detail names the field"},
        },
    )
    async def evaluate(name: str) -> Response:
        raise NotImplementedError(f"served by HotRoute, not FastAPI ({name})")

    return router


def create_metrics_app(server: PolicyServer) -> Starlette:
    """``GET /metrics`` and nothing else: no policy endpoint is reachable through it."""

    async def metrics(_request: Request) -> Response:
        return Response(server.metrics.render(), media_type=CONTENT_TYPE)

    return Starlette(routes=[Route("/metrics", metrics, methods=["GET"])])
