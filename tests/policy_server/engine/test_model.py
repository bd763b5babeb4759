"""The request path: envelope bytes -> frozen dataclasses; every shape error names the field."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.contract.catalogue import EventName
from policy_server.exceptions import RequestError
from policy_server.sdk.model import Event
from tests.policy_server.factory import container, envelope, pod
from tests.policy_server.factory import request as parse_event

EXAMPLES = Path(__file__).parents[3] / "schemas" / "webhook" / "examples"


def test_parse_create_container() -> None:
    c = container(cpu={"shares": 256, "quota": 50000, "period": 100000, "cpus": "0"},
                  memory_limit=67108864, env=["A=1", "B=x=y", "A=2"])
    c["linux"]["oom_score_adj"] = 500
    event = parse_event(envelope("CreateContainer", pod=pod(qos="LS"), container=c))
    assert event.name is EventName.CREATE_CONTAINER and event.runtime_name == "containerd"
    assert event.pod is not None and event.pod.cgroup_parent == "/kubepods/podUID"
    assert event.container is not None and event.container.resources is not None
    assert event.container.resources.cpu.quota == 50000
    assert event.container.resources.memory.limit == 67108864
    assert event.container.oom_score_adj == 500
    assert event.container.env_map() == {"A": "2", "B": "x=y"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.uid = "x"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("mutate", "loc", "msg"),
    [
        (lambda b: b.update(api_version="v0"), ["api_version"], "Invalid enum value 'v0'"),
        (lambda b: b.update(event="CreateContainers"), ["event"], "Invalid enum value"),
        (lambda b: b.pop("pod"), [], "missing required field `pod`"),
        (lambda b: b.pop("container"), [], "missing required field `container`"),
        (lambda b: b.update(dry_run="yes"), ["dry_run"], "Expected `bool`, got `str`"),
        (lambda b: b.update(budget_ms="soon"), ["budget_ms"], "Expected `int`, got `str`"),
        (lambda b: b["pod"].update(labels={"a": 1}), ["pod", "labels", "..."],
         "Expected `str`, got `int`"),
        (lambda b: b["pod"]["linux"].update(cgroup_parent=7), ["pod", "linux", "cgroup_parent"],
         "got `int`"),
        (lambda b: b["container"]["linux"]["resources"].update(cpu={"shares": "256"}),
         ["container", "linux", "resources", "cpu", "shares"], "got `str`"),
        (lambda b: b["container"]["linux"]["resources"].update(memory=[]),
         ["container", "linux", "resources", "memory"], "got `array`"),
        (lambda b: b["container"].update(env="A=1"), ["container", "env"], "got `str`"),
        (lambda b: b["container"].update(mounts=[{"destination": 1}]),
         ["container", "mounts", 0, "destination"], "got `int`"),
        (lambda b: b.update(linux_resources={"cpu": {"quota": True}}),
         ["linux_resources", "cpu", "quota"], "got `bool`"),
        (lambda b: b.update(containers=[{"id": 5}]), ["containers", 0, "id"], "got `int`"),
        (lambda b: b["container"].update(state=2), ["container", "state"],
         "Expected `str | null`, got `int`"),  # the declaration: the state's name, no number
        (lambda b: b.update(pods=[]), [], "unknown field `pods` (not carried by CreateContainer)"),
        (lambda b: b["pod"].update(surprise=1), ["pod"], "unknown field `surprise`"),
    ],
)
def test_shape_errors_give_the_decoders_path_and_message(
        mutate: Any, loc: list[Any], msg: str) -> None:
    body = envelope("CreateContainer", pod=pod(), container=container(cpu={"shares": 2}))
    mutate(body)
    with pytest.raises(RequestError) as info:
        parse_event(body)
    [detail] = info.value.detail
    assert detail["loc"] == ["body", *loc] and msg in str(detail["msg"])


def test_every_contract_example_request_parses() -> None:
    files = sorted(EXAMPLES.glob("*.request.json"))
    assert len(files) == len(EventName)
    for path in files:
        event = parse_event(json.loads(path.read_text()))
        assert event.name.value == path.name.split(".")[0]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=20,
)


@settings(max_examples=300)
@given(st.dictionaries(st.sampled_from(["pod", "container", "linux_resources", "pods",
                                        "containers", "event", "dry_run", "runtime"]), JSON))
def test_random_bodies_raise_only_payload_errors(overrides: dict[str, Any]) -> None:
    body = {**envelope("CreateContainer", pod=pod(), container=container()), **overrides}
    try:
        assert isinstance(parse_event(body), Event)
    except RequestError as exc:
        [detail] = exc.detail
        # json_invalid: the factory writes an infinite float as Infinity, which is not JSON.
        assert detail["type"] in ("value_error", "json_invalid") and detail["msg"]
        assert isinstance(detail["loc"], list) and detail["loc"][0] == "body"


def test_runtime_nri_version_and_capabilities_reach_the_event() -> None:
    body = envelope("CreateContainer", pod=pod(qos="LS"), container=container())
    body["runtime"] = {"name": "containerd", "version": "v2.2.7", "nri_version": "v0.11.0",
                       "capabilities": ["env", "linux.sysctl"]}
    event = parse_event(body)
    assert event.runtime_nri_version == "v0.11.0"
    assert event.runtime_capabilities == frozenset({"env", "linux.sysctl"})
    body["runtime"] = {"name": "x", "version": "1", "capabilities": None}
    assert parse_event(body).runtime_capabilities is None  # unknown runtime
    body["runtime"] = {"name": "x", "version": "1", "capabilities": [1]}
    with pytest.raises(RequestError) as info:
        parse_event(body)
    assert info.value.detail[0]["loc"] == ["body", "runtime", "capabilities", 0]
