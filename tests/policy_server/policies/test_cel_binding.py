"""The ``cel`` policy's fast path: what an expression reads, the partial decode, one program.

The fast path must decide exactly as the exact path does on the whole request: the last test
runs every example NodePolicy (and the benchmark's) over every example request and variants of
them, both ways, and compares the decisions and the counts."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from policy_server import EventName
from policy_server.policies.cel.compiler import eval_env
from policy_server.policies.cel.policy_set import PolicySet
from policy_server.policies.cel.program import evaluate
from policy_server.policies.cel.references import Path as ReadPath
from policy_server.policies.cel.references import paths
from policy_server.policies.cel.request_view import RequestView
from policy_server.policies.cel.tally import Tally

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "schemas" / "webhook" / "examples"
ROOTS = frozenset({"pod", "container"})


def read(source: str) -> set[tuple[tuple[str, ...], bool]]:
    found = paths(eval_env().compile(source), ROOTS)
    assert found is not None
    return {(p.steps, p.presence) for p in found}


@pytest.mark.parametrize(("source", "expected"), [
    ("container.?linux.?resources.?memory.?limit.orValue(0)",
     {(("container", "linux", "resources", "memory", "limit"), False)}),
    ("has(pod.labels) && pod.labels['app'] == 'x'",
     {(("pod", "labels"), True), (("pod", "labels", "app"), False)}),
    ("container.env.all(e, e != 'A=1')", {(("container", "env"), False)}),
    ("size(container) > 0", {(("container",), False)}),
    ("container.mounts[0].destination == '/'", {(("container", "mounts"), False)}),
    ("{'k': pod.name}.k == container.name",
     {(("pod", "name"), False), (("container", "name"), False)}),
    # A local named like a root still counts as the root: more is read, never less.
    ("cel.bind(pod, container.name, pod.size() > 0)",
     {(("container", "name"), False), (("pod",), False)}),
])
def test_the_paths_an_expression_reads(source: str, expected: set[Any]) -> None:
    assert read(source) == expected


def test_the_view_keeps_only_what_is_read() -> None:
    body = (EXAMPLES / "CreateContainer.request.json").read_bytes()
    view = RequestView({ReadPath(("uid",)), ReadPath(("pod", "labels"), presence=True),
                        ReadPath(("pod", "labels", "app")), ReadPath(("container", "env")),
                        ReadPath(("container", "linux", "resources", "nothing"))})
    whole = orjson.loads(body)
    assert view.decode(body) == {
        "uid": whole["uid"],
        "pod": {"labels": {"app": "demo"}},
        "container": {"env": whole["container"]["env"], "linux": {"resources": {}}},
    }
    assert RequestView(None).decode(body) == whole
    assert view.decode(b"") == {}


@pytest.mark.parametrize("paths", [None, {ReadPath(("pod", "name")), ReadPath(("uid",))}])
def test_top_level_nulls_are_left_out(paths: set[ReadPath] | None) -> None:
    body = json.dumps({"uid": "u", "pod": None, "container": None}).encode()
    assert RequestView(paths).decode(body) == {"uid": "u"}


def test_the_policies_in_force_are_found_per_event() -> None:
    policies = PolicySet(REPO / "examples" / "policies" / "cel" / "guard-memory.yaml")
    assert {e: [p.name for p in f.policies] for e, f in policies.by_event.items()} == {
        EventName.VALIDATE_CONTAINER_ADJUSTMENT: ["guard-memory"],
        EventName.CREATE_CONTAINER: ["memory-from-annotation"],
    }


def test_a_body_the_paths_do_not_fit_is_decoded_whole() -> None:
    body = json.dumps({"uid": "u", "pod": {"labels": ["not", "a", "map"]}}).encode()
    view = RequestView({ReadPath(("pod", "labels", "app"))})
    assert view.decode(body) == {"uid": "u", "pod": {"labels": ["not", "a", "map"]}}


FIVE_RULES = REPO / "benchmarks" / "cel" / "five-rules.yaml"
POLICIES = [*sorted((REPO / "examples" / "policies" / "cel").glob("*.yaml")), FIVE_RULES]


def _variants(event: EventName) -> list[dict[str, Any]]:
    base = json.loads((EXAMPLES / f"{event}.request.json").read_text())
    out = [base]
    pod, ctr = base.get("pod"), base.get("container")
    if pod is not None:
        for change in ({"namespace": "kube-system"}, {"labels": {"privileged": "true"}},
                       {"labels": None}, {"labels": {"example.com/pool": "Batch"}},
                       {"annotations": {"example.com/memory": "512Mi"}},
                       {"annotations": {"example.com/memory": "lots"}}):
            out.append({**base, "pod": {**pod, **change}})
    if ctr is not None:
        no_limit = copy.deepcopy(base)
        no_limit["container"].get("linux", {}).get("resources", {}).pop("memory", None)
        out.append(no_limit)
        out.append({**base, "container": {**ctr, "env": ["LD_PRELOAD=/x.so", "DEBUG=1"]},
                    "pod": {**pod, "labels": {"example.com/pool": "x"}}})
        out.append({**base, "container": {**ctr, "annotations": {
            "io.kubernetes.cri.image-name": "busybox:latest"}}})
        bare = {k: v for k, v in ctr.items() if k in ("id", "name", "pod_sandbox_id")}
        out.append({**base, "container": bare})
    return out


@pytest.mark.parametrize("file", POLICIES, ids=lambda p: p.name)
def test_the_fast_path_decides_as_the_exact_path_on_the_whole_request(file: Path) -> None:
    policies = PolicySet(file)
    compared = 0
    for compiled in policies.current:
        assert compiled.program is not None and compiled.reads is not None
        exact = dataclasses.replace(compiled, program=None)
        for event in sorted(compiled.events):
            if not (EXAMPLES / f"{event}.request.json").exists():
                continue
            view = policies.by_event[event].view
            for variant in _variants(event):
                body = orjson.dumps(variant)
                want_tally, got_tally = Tally(), Tally()
                want = evaluate(exact, event, orjson.loads(body), want_tally)
                got = evaluate(compiled, event, view.decode(body), got_tally)
                assert got == want, (compiled.name, event, variant)
                assert got_tally.counts() == want_tally.counts(), (compiled.name, variant)
                compared += 1
    assert compared >= 4
