"""Hostile request fields (issue 42, item 5): one bad container never stops the node.

A pod author, or whoever forges what the bridge reports, controls strings the policy server
reads: names, labels, annotations, cgroup and mount paths. Every string of a request is checked
at the one request decoder against its field's limits (bridge/contract/field_limits.py) and
refused with a 400 naming the field; a resync or reconcile pass skips, logs, counts and reports
a container of the bridge's state the decoder refuses, and goes on for the others.

Findings, each failing on the main branch before this change:
- a RunPodSandbox whose ``cgroup_parent`` holds a NUL byte answered 500 (the node executor's
  write raised "embedded null byte"): now 400 naming ``pod.linux.cgroup_parent``, against a real
  ``nri-policy-server`` process, whose next event succeeds;
- a container with such a ``cgroups_path`` in the bridge's state failed every pass: now it is
  skipped, the others reconciled, and ``GET /v1/state`` and a metric show it;
- a pass that failed left ``GET /v1/state`` showing the last good pass: now its error.

The hypothesis test puts hostile strings into every string field of a request (the fields are
enumerated from the decoder's Structs) and asks for a 400 naming the field or a clean answer,
never a 500, with the next event answered 200.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import msgspec.inspect as mi
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge.contract.field_limits import CGROUP, FIELDS, PATH, TEXT, FieldLimit, limit_problem
from bridge.contract.field_limits import KEY as KEY_LIMIT
from bridge.contract.request_structs import WebhookRequest
from policy_server.engine.request_fields import FULL, refusal, walk_needed
from policy_server.http_edge.asgi import create_app
from tests.hardening.processes import POLICY_SERVER, Process
from tests.policy_server.factory import container, envelope
from tests.policy_server.node.test_node_reconciler import LSR_PARENT, node
from tests.waiting import until

pytestmark = pytest.mark.processes  # starts processes: not in make check

# --- the request's string fields, from the decoder's Structs ---------------------------------

Path_ = tuple[str | int, ...]
KEY = "<key>"  # a path step: the map's key itself, not a value (a map of strings)
KEY_OF_OBJECTS = "<key of objects>"  # the same, in a map whose values are objects
KEYS = (KEY, KEY_OF_OBJECTS)


def table_limit(cls: type, field: str) -> FieldLimit:
    """The contract's table, read here on its own: the limit of ``cls.field``."""
    names = [k.__name__ for k in cls.__mro__]  # Adjustment is a ContainerAdjustment
    return next((FIELDS[(n, field)] for n in names if (n, field) in FIELDS), TEXT)


def string_paths(
    t: Any, prefix: Path_ = (), limit: FieldLimit = TEXT, depth: int = 0
) -> Iterator[tuple[Path_, FieldLimit]]:
    """Every place a string can be under type ``t``, with the limit the table gives it:
    fields, list items (index 0), map keys (``KEY``) and values (key ``k``)."""
    if isinstance(t, mi.Metadata):  # the declaration's schema text around a type
        yield from string_paths(t.type, prefix, limit, depth)
    elif isinstance(t, mi.UnionType):
        for x in t.types:
            yield from string_paths(x, prefix, limit, depth)
    elif isinstance(t, mi.StrType):
        yield prefix, limit
    elif isinstance(t, mi.ListType):
        yield from string_paths(t.item_type, (*prefix, 0), limit, depth)
    elif isinstance(t, mi.DictType):
        if isinstance(t.key_type, mi.StrType):
            objects = any(isinstance(x, mi.StructType) for x in getattr(
                t.value_type, "types", (t.value_type,)))
            yield (*prefix, KEY_OF_OBJECTS if objects else KEY), KEY_LIMIT
        yield from string_paths(t.value_type, (*prefix, "k"), limit, depth)
    elif isinstance(t, mi.StructType) and depth < 8:
        for f in t.fields:
            yield from string_paths(f.type, (*prefix, f.name), table_limit(t.cls, f.name),
                                    depth + 1)


# A CreateContainer's own keys, the envelope's, and Synchronize's lists (one entry each).
SKIPPED_TOP = {"adjust", "update", "owners", "plugins"}  # ValidateContainerAdjustment's
LIMITS = {p: lim for p, lim in string_paths(mi.type_info(WebhookRequest))
          if p[0] not in SKIPPED_TOP}
PATHS = sorted(LIMITS, key=str)
assert len(PATHS) > 150, len(PATHS)  # every NRI message a request carries, not a sample
assert LIMITS["container", "linux", "cgroups_path"] is CGROUP
assert LIMITS["pod", "linux", "cgroup_parent"] is CGROUP
assert LIMITS["container", "mounts", 0, "destination"] is PATH
assert LIMITS["containers", 0, "env", 0] is TEXT

POD_ID, CID = "p1", "c1"


def base_body() -> dict[str, Any]:
    pod = {"id": POD_ID, "name": "web", "uid": "u1", "namespace": "team-a",
           "labels": {"koordinator.sh/qosClass": "LSR"},
           "linux": {"cgroup_parent": LSR_PARENT}}
    ctr = container(cid=CID, pod_id=POD_ID, cpu={"cpus": "1", "quota": -1, "shares": 1024})
    ctr["linux"]["cgroups_path"] = f"{LSR_PARENT}/{CID}"
    ctr["mounts"] = [{"destination": "/data", "source": "/var/lib/data", "type": "bind"}]
    return envelope("CreateContainer", pod=pod, container=ctr)


def body_for(top: str | int) -> dict[str, Any]:
    """``base_body``, as the event that carries payload key ``top`` (an event's request carries
    only its own payload keys: Synchronize the lists, UpdatePodSandbox the pod's resources)."""
    body = base_body()
    pod, ctr = body.pop("pod"), body.pop("container")
    if top in ("pods", "containers"):
        return {**body, "event": "Synchronize", "pods": [pod], "containers": [ctr]}
    if top in ("linux_resources", "overhead_linux_resources"):
        return {**body, "event": "UpdatePodSandbox", "pod": pod}
    return {**body, "pod": pod, "container": ctr}


def placed(body: dict[str, Any], path: Path_, value: str) -> dict[str, Any]:
    """``body`` with ``value`` at ``path`` (dicts and one-item lists made on the way)."""
    out = copy.deepcopy(body)
    node: Any = out
    for step, following in zip(path, (*path[1:], None), strict=True):
        if following in KEYS:  # the map's key: one more entry, the hostile key
            node.setdefault(step, {})[value] = "v" if following == KEY else {}
            return out
        if following is None:
            if isinstance(step, int):
                node.append(value)
            else:
                node[step] = value
            return out
        if isinstance(step, int):
            if not node:
                node.append({} if isinstance(following, str) else [])
            node = node[0]
        else:
            if not isinstance(node.get(step), dict | list):
                node[step] = [] if isinstance(following, int) else {}
            node = node[step]
    return out


def encoded(body: dict[str, Any], as_bridge: bool = False) -> bytes:
    """json.dumps writes every non-ASCII character as a \\u escape (lone surrogates too);
    ``as_bridge``: orjson's UTF-8 as the bridge sends it (DEL raw, controls escaped), where it
    can encode the body."""
    if as_bridge:
        try:
            return orjson.dumps(body)
        except TypeError:  # a lone surrogate
            pass
    return json.dumps(body).encode()


def field_name(path: Path_) -> str:
    """How the 400's ``msg`` names the field at ``path`` (``container.labels["k"]``)."""
    out = ""
    for step in path:
        if isinstance(step, int):
            out += f"[{step}]"
        elif not out:
            out = step
        else:
            out += f".{step}" if step.isidentifier() else f"[{json.dumps(step)}]"
    return out


def assert_clean_answer(status: int, answer: bytes, path: Path_, value: str) -> None:
    """A 400 naming the field if the value breaks the limit the table gives the field, else
    200; a lone surrogate is not JSON text the decoder reads (422 ``json_invalid`` for the
    body); never a 500."""
    assert status != 500, (path, value[:40], answer[:300])
    # What the JSON text means: a surrogate pair is one character, a lone surrogate none.
    value = value.encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")
    if any(0xD800 <= ord(c) <= 0xDFFF for c in value):
        assert status == 422, (path, answer[:300])
        assert json.loads(answer)["detail"][0]["type"] == "json_invalid"
        return
    broken = limit_problem(LIMITS[path], value)
    if broken is None:
        assert status == 200, (path, value[:40], answer[:300])
        return
    assert status == 400, (path, value[:40], broken, status, answer[:300])
    [detail] = json.loads(answer)["detail"]
    assert detail["type"] == "field_refused", detail
    loc, expected = detail["loc"][1:], [s for s in path if s not in KEYS]
    # A map value's key is named, or "..." where msgspec refused its length (it names none).
    assert len(loc) == len(expected), (loc, path)
    assert all(a == b or (a == "..." and b == "k") for a, b in zip(loc, expected, strict=True))
    assert detail["loc"][0] == "body"
    assert detail["msg"].startswith(f"{field_name(tuple(loc))}: "), (detail["msg"], loc)


HOSTILE = st.one_of(
    st.sampled_from([
        "\x00", "a\x00b", "/kubepods/pod\x00u1", "\x01", "\x1b[31m", "\x7f", "line\nbreak",
        "tab\there", "\r", "..", "../../etc", "/a/../b", "/ok/..", "relative/path",
        "x" * 1025, "y" * 4097, "z" * ((256 << 10) + 1), "\ud800", "a\udfffb", "é\u2028",
    ]),
    st.text(st.characters(max_codepoint=0x7F), max_size=12),
    st.text(st.characters(categories=["Cc", "Cs", "Zl", "Zp"]), min_size=1, max_size=4),
)


# --- in process (the app the server runs), every field ---------------------------------------


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(path=st.sampled_from(PATHS), value=HOSTILE, as_bridge=st.booleans())
def test_hostile_strings_in_every_field_get_a_400_naming_it_or_a_clean_answer(
    path: Path_, value: str, as_bridge: bool,
    hostile_app: tuple[asyncio.AbstractEventLoop, httpx.AsyncClient],
) -> None:
    loop, client = hostile_app
    raw = encoded(placed(body_for(path[0]), path, value), as_bridge)
    response = loop.run_until_complete(client.post(URL, content=raw))
    assert_clean_answer(response.status_code, response.content, path, value)
    # The walk the body's bytes picked finds what the walk over every string finds.
    try:
        request = msgspec.json.decode(raw, type=WebhookRequest)
    except msgspec.DecodeError:
        request = None
    if request is not None and refusal(request, FULL) is not None:
        assert refusal(request, walk_needed(raw)) is not None, (path, value)
        assert response.status_code == 400
    clean = loop.run_until_complete(client.post(URL, content=encoded(base_body())))
    assert clean.status_code == 200, clean.text


URL = "/v1/policies/koordinator-qos"
JSON = {"Content-Type": "application/json"}


@pytest.fixture
def hostile_app(
    tmp_path: Path,
) -> Iterator[tuple[asyncio.AbstractEventLoop, httpx.AsyncClient]]:
    """The policy server's app with koordinator-qos, node effects on fake roots."""
    server, _, _ = node(tmp_path)
    loop = asyncio.new_event_loop()
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(server)),
                               base_url="http://policy")
    try:
        yield loop, client
    finally:
        loop.run_until_complete(client.aclose())
        loop.close()


# --- a real nri-policy-server process ---------------------------------------------------------


async def test_a_nul_cgroup_parent_is_a_400_naming_it_and_the_next_event_succeeds(
    workdir: Path, tmp_path: Path
) -> None:
    node(tmp_path)  # the fake cgroup, proc and resctrl trees and the rules file
    sock = workdir / "policy.sock"
    process = await Process.start(
        [str(POLICY_SERVER), "--uds", str(sock), "--rules", str(tmp_path / "rules.yaml"),
         "--pod-cgroup-writes", "on", "--cgroup-root", str(tmp_path / "cgroup"),
         "--cgroup-version", "1", "--resctrl-root", str(tmp_path / "resctrl"),
         "--proc-root", str(tmp_path / "proc"), "--log-level", "warning"],
        workdir / "policy.log")
    try:
        await until(sock.exists, what="the policy server listens", timeout_s=60.0,
                    proc=process.proc, details=process.log_text)
        transport = httpx.AsyncHTTPTransport(uds=str(sock))
        async with httpx.AsyncClient(transport=transport, base_url="http://policy") as client:
            await until_serving(client)
            good = base_body()
            run = {k: v for k, v in good.items() if k != "container"} | {"event": "RunPodSandbox"}
            bad = copy.deepcopy(run)
            bad["pod"]["linux"]["cgroup_parent"] = "/kubepods/besteffort/pod\x00u2"
            answer = await client.post(URL, content=encoded(bad), headers=JSON)
            assert answer.status_code == 400, answer.text
            assert answer.json()["detail"] == [{
                "type": "field_refused", "loc": ["body", "pod", "linux", "cgroup_parent"],
                "msg": "pod.linux.cgroup_parent: contains a NUL byte"}]
            ctr = copy.deepcopy(good)
            ctr["container"]["linux"]["cgroups_path"] = "/kubepods/podu1/../../../etc"
            answer = await client.post(URL, content=encoded(ctr), headers=JSON)
            assert answer.status_code == 400
            assert answer.json()["detail"][0]["msg"] == (
                "container.linux.cgroups_path: has a `..` component")
            for body in (run, good):  # the next events are served as before
                answer = await client.post(URL, content=encoded(body), headers=JSON)
                assert answer.status_code == 200, answer.text
        assert process.running
    finally:
        await process.terminate()


async def until_serving(client: httpx.AsyncClient) -> None:
    async def answers() -> bool:
        try:
            return (await client.get("/healthz")).status_code == 200
        except httpx.TransportError:
            return False

    for _ in range(200):
        if await answers():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the policy server never answered /healthz")


# --- one bad container in a pass --------------------------------------------------------------


def bad_container(cgroups_path: str) -> dict[str, Any]:
    out = container(cid="c-bad", name="evil", pod_id="p1")
    out["linux"]["cgroups_path"] = cgroups_path
    return out


@pytest.mark.parametrize("path", [f"{LSR_PARENT}/c\x00bad", f"{LSR_PARENT}/../../../etc"])
async def test_one_bad_container_is_skipped_and_the_others_reconciled(
    tmp_path: Path, path: str
) -> None:
    server, fake, _ = node(tmp_path)
    fake.containers.append(bad_container(path))
    assert await server.resync.run_pass()  # before: False on every pass ("embedded null byte")
    # The good container's drift is fixed as without the bad one.
    assert fake.pushed == [{"container_id": "c1",
                            "linux": {"resources": {"cpu": {"quota": -1, "cpus": "1"}}}}]
    last = server.node_state()["reconciler"]["last_pass"]
    assert last["completed"] and last["error"] is None
    assert last["drift_found"]["pod"] == 4
    [skipped] = last["skipped"]
    assert skipped["id"] == "c-bad" and skipped["name"] == "evil" and skipped["pod"] == "p1"
    assert skipped["field"] == "linux.cgroups_path"
    assert skipped["error"] in ("contains a NUL byte", "has a `..` component")
    metrics = server.metrics.render().decode()
    for source in ("resync", "reconcile"):
        line = f'policy_reconcile_container_failures_total{{pass="{source}",reason="refused"}} 1.0'
        assert line in metrics, metrics
    # The next pass goes on the same way.
    assert await server.resync.run_pass(full=False)
    assert server.node_state()["reconciler"]["last_pass"]["skipped_count"] == 1


async def test_a_failed_pass_shows_its_error_not_the_last_good_one(tmp_path: Path) -> None:
    server, fake, _ = node(tmp_path)
    assert await server.resync.run_pass()
    assert server.node_state()["reconciler"]["last_pass"]["completed"]
    fake.pods = "not a list"  # type: ignore[assignment]  # a state the bridge should never send
    assert not await server.resync.run_pass()
    last = server.node_state()["reconciler"]["last_pass"]
    assert last["completed"] is False
    assert "pods" in last["error"], last
