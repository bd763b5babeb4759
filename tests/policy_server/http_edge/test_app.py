"""The HTTP layer in-process (ASGI transport): routes, 422s naming the field, reply checks."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from bridge.contract import WebhookReply
from policy_server import (
    ContainerUpdate,
    Decision,
    Event,
    EventName,
    Policy,
    ResourcePatch,
)
from policy_server.http_edge.asgi import _documented, create_app
from policy_server.node.cgroup_layout import CgroupVersion
from policy_server.node.execution import ExecutorMode
from policy_server.service import PolicyServer, ServerOptions
from tests.policy_server.factory import (
    ANOLIS_V2_FILES,
    cgroup_v2_root,
    container,
    envelope,
    koordinator_of,
    pod,
)

RS = "scheduling.koordinator.sh/resource-status"
EXAMPLES = Path(__file__).parents[3] / "schemas" / "webhook" / "examples"

broken = Policy("broken")

# In-process ServerOptions read no topology: the node is not known, so nothing is checked.
UNREAD_TOPOLOGY: dict[str, object] = {"cpus": None, "memory_bytes": None, "mems": None,
                                      "node_cpus": {}}


@broken.on(EventName.CREATE_CONTAINER)
def empty_id(event: Event) -> Decision:
    return Decision(update=(ContainerUpdate("", ResourcePatch(cpu_shares=2)),))


async def client_for(server: PolicyServer) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=create_app(server))
    return httpx.AsyncClient(transport=transport, base_url="http://policy")


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with await client_for(PolicyServer(ServerOptions(), [broken])) as c:
        yield c


async def test_list_policies(client: httpx.AsyncClient) -> None:
    body = (await client.get("/v1/policies")).json()
    by_name = {p["name"]: p for p in body["policies"]}
    assert set(by_name) == {"koordinator-qos", "broken"}
    koord = by_name["koordinator-qos"]
    assert koord["url"] == "/v1/policies/koordinator-qos"
    assert koord["events"] == ["Synchronize", "RunPodSandbox", "RemovePodSandbox",
                               "CreateContainer", "UpdateContainer", "RemoveContainer"]
    assert koord["handlers"]["UpdateContainer"] == ["BatchResource", "CPUNormalization",
                                                    "CPUSetAllocator"]
    assert "RemoveContainer" not in koord["handlers"]  # observed, not handled
    assert by_name["broken"]["handlers"] == {"CreateContainer": ["empty_id"]}


async def test_evaluate_and_metrics(client: httpx.AsyncClient) -> None:
    # Guaranteed with one whole CPU: kubelet's decision backs the one-CPU cpuset.
    body = envelope("CreateContainer", pod=pod(qos="LSR", annotations={RS: {"cpuset": "1"}}),
                    container=container(cpu={"shares": 1024, "quota": 100000, "period": 100000}))
    response = await client.post("/v1/policies/koordinator-qos", json=body)
    assert response.status_code == 200
    assert response.json() == {"adjust": {"linux": {"resources": {"cpu": {"quota": -1,
                                                                          "cpus": "1"}}}}}
    WebhookReply.model_validate(response.json())
    metrics = (await client.get("/metrics")).text
    assert ('policy_requests_total{event="CreateContainer",outcome="ok",'
            'policy="koordinator-qos"} 1.0') in metrics
    assert "policy_decision_seconds_bucket" in metrics


@pytest.mark.parametrize(
    ("mutate", "loc", "msg"),
    [
        (lambda b: b["container"]["linux"]["resources"].update(cpu={"shares": "x"}),
         ["body", "container", "linux", "resources", "cpu", "shares"],
         "Expected `int | null`, got `str`"),
        (lambda b: b.pop("runtime"), ["body"], "Object missing required field `runtime`"),
        (lambda b: b.update(event="Create"), ["body", "event"], "Invalid enum value 'Create'"),
        (lambda b: b["pod"].update(labels=[]), ["body", "pod", "labels"],
         "Expected `object | null`, got `array`"),
        (lambda b: b.pop("container"), ["body"],  # the SDK's per-event rule
         "Object missing required field `container` (required for CreateContainer)"),
    ],
)
async def test_bad_requests_get_422_with_the_decoders_path_and_message(
    client: httpx.AsyncClient, mutate: Any, loc: list[Any], msg: str
) -> None:
    body = envelope("CreateContainer", pod=pod(), container=container(cpu={"shares": 2}))
    mutate(body)
    response = await client.post("/v1/policies/koordinator-qos", json=body)
    assert response.status_code == 422
    assert response.json()["detail"] == [{"type": "value_error", "loc": loc, "msg": msg}]


async def test_invalid_json_and_unknown_policy(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/policies/koordinator-qos", content=b"{nope",
                                 headers={"content-type": "application/json"})
    assert response.status_code == 422 and response.json()["detail"][0]["type"] == "json_invalid"
    body = envelope("StartContainer", pod=pod(), container=container())
    response = await client.post("/v1/policies/nope", json=body)
    assert response.status_code == 404
    assert "known: koordinator-qos, broken" in response.json()["detail"]


async def test_a_handler_building_a_value_outside_the_contract_fails_like_a_raising_one(
        client: httpx.AsyncClient) -> None:
    """The SDK's values are built inside the reply contract: the handler that builds an update
    with an empty container id raises there, and the server treats it as any raising handler
    (the policy's failure policy, here Ignore: a warning naming the field and the limit; the
    handler counted as failed). The reply the server sends is inside the contract."""
    body = envelope("CreateContainer", pod=pod(), container=container())
    response = await client.post("/v1/policies/broken", json=body)
    assert response.status_code == 200
    assert response.json() == {"warnings": [
        "empty_id: internal error (ValueError: ContainerUpdate.container_id: length 0 is below "
        "minLength 1 (reply contract: update/[]/container_id))"]}
    WebhookReply.model_validate_json(response.content)
    metrics = (await client.get("/metrics")).text
    assert 'policy_handler_failures_total{handler="empty_id",policy="broken"} 1.0' in metrics


async def test_healthz_and_rules(client: httpx.AsyncClient) -> None:
    health = (await client.get("/healthz")).json()
    assert health["status"] == "ok" and health["policies"] == ["koordinator-qos", "broken"]
    rules = (await client.get("/v1/rules")).json()
    assert rules["rules"]["features"]["CPUSetAllocator"] is True
    assert rules["file"] is None and rules["last_error"] is None
    docs = await client.get("/openapi.json")
    assert "/v1/policies/{name}" in docs.json()["paths"]


async def test_pod_effects_are_reported_when_the_executor_is_off(
    client: httpx.AsyncClient,
) -> None:
    body = envelope("RunPodSandbox", pod=pod(qos="LSR", annotations={RS: {"cpuset": "1"}}))
    response = await client.post("/v1/policies/koordinator-qos", json=body)
    assert response.json() == {"warnings": [
        "pod cgroup writes not applied (executor off): /kubepods/podUID: cpu.cfs_quota_us=-1"]}


async def test_pod_effects_are_written_when_the_executor_is_on(tmp_path: Path) -> None:
    pod_dir = tmp_path / "cpu/kubepods/podUID"
    pod_dir.mkdir(parents=True)
    (pod_dir / "cpu.cfs_quota_us").write_text("200000")
    server = PolicyServer(ServerOptions(executor_mode=ExecutorMode.ON, cgroup_root=tmp_path))
    body = envelope("RunPodSandbox", pod=pod(qos="LSR", annotations={RS: {"cpuset": "1"}}))
    async with await client_for(server) as c:
        dry = await c.post("/v1/policies/koordinator-qos", json={**body, "dry_run": True})
        assert dry.json() == {"warnings": [
            "pod cgroup writes not applied (dry_run request): /kubepods/podUID: "
            "cpu.cfs_quota_us=-1"]}
        assert (pod_dir / "cpu.cfs_quota_us").read_text() == "200000"
        response = await c.post("/v1/policies/koordinator-qos", json=body)
        assert response.json() == {}
        assert (pod_dir / "cpu.cfs_quota_us").read_text() == "-1"
        metrics = (await c.get("/metrics")).text
        assert 'policy_pod_cgroup_writes_total{result="written"} 1.0' in metrics


async def test_every_contract_example_gets_a_valid_reply(client: httpx.AsyncClient) -> None:
    for path in sorted(EXAMPLES.glob("*.request.json")):
        response = await client.post("/v1/policies/koordinator-qos",
                                     json=json.loads(path.read_text()))
        assert response.status_code == 200, (path.name, response.text)
        WebhookReply.model_validate(response.json())


async def test_state_says_what_cannot_take_effect_and_events_stay_quiet(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A host whose cgroup tree is not there (or read-only): said once, not per event.
    server = PolicyServer(ServerOptions(executor_mode=ExecutorMode.ON,
                                        cgroup_root=tmp_path / "no-cgroup",
                                        resctrl_root=tmp_path / "no-resctrl"))
    with caplog.at_level("WARNING"):
        server.probe_node()
    assert [r.getMessage() for r in caplog.records if "pod cgroup writes" in r.getMessage()] == [
        f"pod cgroup writes cannot take effect: no cgroup hierarchy at {tmp_path}/no-cgroup/cpu; "
        "pod-level values are not applied"]
    body = envelope("RunPodSandbox", pod=pod(qos="LSR", annotations={RS: {"cpuset": "1"}}))
    async with await client_for(server) as c:
        assert (await c.post("/v1/policies/koordinator-qos", json=body)).json() == {}
        state = (await c.get("/v1/state")).json()["node_effects"]
    assert state["mode"] == "on"
    assert state["cgroups"]["writable"] is False and "no cgroup hierarchy" in state["cgroups"][
        "reason"]
    assert state["resctrl"]["usable"] is False
    assert state["reconciler"] == {
        "running": False,
        "reason": "no --bridge-control (the reconciler lists pods through the bridge)"}


def _declared_route() -> FastAPI:
    """FastAPI serving the OpenAPI-only declaration of the route: its request validation is the
    contract's pydantic model (the endpoint itself is never meant to run)."""
    app = FastAPI()
    app.include_router(_documented())
    return app


@pytest.mark.parametrize(
    "mutate",
    [
        lambda b: b["container"]["linux"]["resources"].update(cpu={"shares": "x"}),
        lambda b: b.pop("runtime"),
        lambda b: b.update(event="Create", extra=1),
        lambda b: b.update(budget_ms=-1),
        lambda b: b.pop("container"),  # the contract takes it, the SDK does not
        lambda b: b.update(budget_ms="5"),  # strict JSON types: no number as a string
        lambda b: b.pop("api_version"),  # the model's default, the SDK's 422
    ],
)
async def test_the_hot_route_refuses_what_the_documented_contract_refuses(mutate: Any) -> None:
    """The decoder is at least as strict as the documented model: a body FastAPI's validation of
    the declaration refuses (422) is refused by the hot route too, with the decoder's words."""
    body = envelope("CreateContainer", pod=pod(qos="LSR", annotations={RS: {"cpuset": "1"}}),
                    container=container(cpu={"shares": 2}))
    mutate(body)
    server = PolicyServer(ServerOptions())
    answers = []
    for app in (create_app(server), _declared_route()):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://policy") as c:
            response = await c.post("/v1/policies/koordinator-qos", json=body)
        answers.append((response.status_code, response.text))
    assert answers[0][0] == 422 and json.loads(answers[0][1])["detail"][0]["msg"]
    assert answers[1][0] in (422, 500)  # 500: the declaration took it, its endpoint never runs


async def test_the_fastapi_app_only_documents_the_post_route() -> None:
    server = PolicyServer(ServerOptions())
    app = create_app(server)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app.app),
                                 base_url="http://policy") as c:
        behind = await c.post("/v1/policies/koordinator-qos", json={})
        docs = (await c.get("/openapi.json")).json()
    assert behind.status_code == 404  # no route: HotRoute in front is the only one
    post = docs["paths"]["/v1/policies/{name}"]["post"]
    assert post["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/request.WebhookRequest"}
    request = docs["components"]["schemas"]["request.WebhookRequest"]
    assert "api_version" in request["required"]  # the request's one declaration
    assert request["properties"]["pod"]["anyOf"][0] == {
        "$ref": "#/components/schemas/request.PodSandbox"}
    assert "request.PodSandbox" in docs["components"]["schemas"]
    assert {"200", "404", "415", "422"} <= set(post["responses"])


async def test_a_body_that_is_not_json_by_content_type_gets_415(
    client: httpx.AsyncClient,
) -> None:
    body = envelope("CreateContainer", pod=pod(), container=container())
    response = await client.post("/v1/policies/koordinator-qos", content=json.dumps(body),
                                 headers={"content-type": "text/plain"})
    assert response.status_code == 415
    assert "expected content-type application/json, got 'text/plain'" in response.json()["detail"]
    for ok in ("application/json; charset=utf-8", "application/webhook+json"):
        response = await client.post("/v1/policies/koordinator-qos", content=json.dumps(body),
                                     headers={"content-type": ok})
        assert response.status_code == 200, ok


async def test_other_methods_and_paths_still_reach_fastapi(client: httpx.AsyncClient) -> None:
    assert (await client.get("/v1/policies/koordinator-qos")).status_code == 405
    assert (await client.post("/v1/policies/koordinator-qos/extra", json={})).status_code == 404


PRODUCTION_RULES = Path(__file__).parents[3] / "deploy/kubernetes/overlays/production/rules.yaml"
BE_POD = pod(qos="BE", cgroup_parent="/kubepods/besteffort/podUID")


def cgroup_tree(root: Path, version: int) -> Path:
    """A cgroup root as auto-detection sees it (v2: a stock kernel's, see ``cgroup_v2_root``;
    v1: controller dirs)."""
    if version == 2:
        return cgroup_v2_root(root)
    for controller in ("cpu", "memory"):
        (root / controller).mkdir(parents=True)
    return root


async def test_cgroup_v1_node_containers_never_get_unified_and_it_is_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The production rules declare group_identity_kernel_support (cgroup v2 Anolis kernels);
    # on a cgroup v1 node runc would refuse every container that got unified[cpu.bvt_warp_ns].
    server = PolicyServer(ServerOptions(rules_path=PRODUCTION_RULES,
                                        cgroup_root=cgroup_tree(tmp_path / "cg", 1)))
    with caplog.at_level("INFO"):
        server.probe_node()
    said = [r for r in caplog.records if "group identity on containers is off" in r.getMessage()]
    assert [r.levelname for r in said] == ["WARNING"]
    assert "cgroup v1: runc refuses unified keys" in said[0].getMessage()
    caplog.clear()
    async with await client_for(server) as c:
        create = envelope("CreateContainer", pod=BE_POD, container=container())
        reply = (await c.post("/v1/policies/koordinator-qos", json=create)).json()
        sync = envelope("Synchronize", pods=[BE_POD], containers=[container()])
        synced = (await c.post("/v1/policies/koordinator-qos", json=sync)).json()
        state = (await c.get("/v1/state")).json()["node_effects"]
    assert "unified" not in json.dumps(reply) and "unified" not in json.dumps(synced)
    assert reply == {}, reply  # on cgroup v2 the same request gets the unified key (below)
    assert not [r for r in caplog.records if "group identity" in r.getMessage()]  # once only
    assert state["node"] == {"cgroup_version": 1, "unified_allowed": False, "cgroup_files": None,
                             "topology": UNREAD_TOPOLOGY}
    assert state["group_identity"]["container_unified"] is False
    assert "cgroup v1" in state["group_identity"]["container_unified_reason"]


BVT_UNIFIED = '"cpu.bvt_warp_ns"'


async def test_stock_cgroup_v2_kernel_containers_get_no_bvt_key_and_it_is_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Issue 24: a Debian kernel on cgroup v2 has no cpu.bvt_warp_ns; with the production rules
    # (group_identity_kernel_support: true) runc refused every container that got
    # unified[cpu.bvt_warp_ns] ("openat2 .../cpu.bvt_warp_ns: no such file or directory").
    server = PolicyServer(ServerOptions(rules_path=PRODUCTION_RULES,
                                        cgroup_root=cgroup_tree(tmp_path / "cg", 2)))
    assert koordinator_of(server).rules.current.group_identity_kernel_support
    with caplog.at_level("INFO"):
        server.probe_node()
    said = [r for r in caplog.records if "group identity on containers is off" in r.getMessage()]
    caplog.clear()
    async with await client_for(server) as c:
        create = envelope("CreateContainer", pod=BE_POD, container=container())
        reply = (await c.post("/v1/policies/koordinator-qos", json=create)).json()
        sync = envelope("Synchronize", pods=[BE_POD], containers=[container()])
        synced = (await c.post("/v1/policies/koordinator-qos", json=sync)).json()
        state = (await c.get("/v1/state")).json()["node_effects"]
    assert BVT_UNIFIED not in json.dumps(reply), reply
    assert BVT_UNIFIED not in json.dumps(synced), synced
    assert reply == {}, reply  # the container starts; its pod cgroup is the place for bvt
    assert [r.levelname for r in said] == ["WARNING"]
    assert "the containers' cgroups have no cpu.bvt_warp_ns" in said[0].getMessage()
    assert not [r for r in caplog.records if "group identity" in r.getMessage()]  # once only
    assert state["node"]["cgroup_version"] == 2
    assert "cpu.idle" in state["node"]["cgroup_files"]
    assert "cpu.bvt_warp_ns" not in state["node"]["cgroup_files"]
    assert state["group_identity"]["container_unified"] is False
    assert "no cpu.bvt_warp_ns" in state["group_identity"]["container_unified_reason"]


@pytest.mark.parametrize("root", ["no kubepods cgroup", "no cgroup tree"])
async def test_containers_get_no_bvt_key_where_the_files_are_not_known(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, root: str
) -> None:
    # The safe side: a key nobody saw the file of could stop every container.
    cgroups = (cgroup_v2_root(tmp_path / "cg", None) if root == "no kubepods cgroup"
               else tmp_path / "no-cgroup")
    server = PolicyServer(ServerOptions(rules_path=PRODUCTION_RULES, cgroup_root=cgroups))
    with caplog.at_level("INFO"):
        server.probe_node()
    said = [r for r in caplog.records if "group identity on containers is off" in r.getMessage()]
    async with await client_for(server) as c:
        create = envelope("CreateContainer", pod=BE_POD, container=container())
        reply = (await c.post("/v1/policies/koordinator-qos", json=create)).json()
    assert reply == {}, reply
    assert [r.levelname for r in said] == ["WARNING"]
    assert "which files the containers' cgroups have is not known" in said[0].getMessage()


async def test_cgroup_v2_node_whose_containers_have_the_bvt_file_gets_the_key(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cgroups = cgroup_v2_root(tmp_path / "cg", ANOLIS_V2_FILES)
    server = PolicyServer(ServerOptions(rules_path=PRODUCTION_RULES, cgroup_root=cgroups))
    with caplog.at_level("INFO"):
        server.probe_node()
    assert not [r for r in caplog.records if "group identity on containers" in r.getMessage()]
    async with await client_for(server) as c:
        create = envelope("CreateContainer", pod=BE_POD, container=container())
        reply = (await c.post("/v1/policies/koordinator-qos", json=create)).json()
        state = (await c.get("/v1/state")).json()["node_effects"]
    assert reply["adjust"]["linux"]["resources"]["unified"] == {"cpu.bvt_warp_ns": "-1"}
    assert state["node"] == {"cgroup_version": 2, "unified_allowed": True,
                             "cgroup_files": sorted(ANOLIS_V2_FILES),
                             "topology": UNREAD_TOPOLOGY}
    assert state["group_identity"]["container_unified"] is True
    assert state["group_identity"]["container_unified_reason"] == ""


def test_an_explicit_cgroup_version_wins_over_detection(tmp_path: Path) -> None:
    server = PolicyServer(ServerOptions(cgroup_root=cgroup_tree(tmp_path / "cg", 2),
                                        cgroup_version=CgroupVersion.V1))
    assert server.facts.cgroup_version == 1 and not server.facts.unified_allowed


async def test_healthz_shows_a_refused_cel_reload(tmp_path: Path) -> None:
    from policy_server.policies import build_builtin
    from policy_server.sdk.extension import ReloadResult

    file = tmp_path / "p.yaml"
    file.write_text("apiVersion: nri-webhook-bridge.io/v1alpha1\nkind: NodePolicy\n"
                    "metadata: {name: p}\nspec:\n  events: [CreateContainer]\n"
                    "  validations: [{expression: 'true'}]\n")
    cel = build_builtin("cel", file)
    async with await client_for(PolicyServer(ServerOptions(), [cel])) as c:
        assert (await c.get("/healthz")).json()["configs"]["cel"] == {
            "file": str(file), "generation": 1, "last_error": None}
        file.write_text(file.read_text().replace("'true'", "'nope'"))
        state = cel.context()  # the PolicySet, polled as its background task does
        assert state.poll() is ReloadResult.INVALID
        health = (await c.get("/healthz")).json()
    assert health["configs"]["cel"]["generation"] == 1
    assert "undeclared reference to 'nope'" in health["configs"]["cel"]["last_error"]
