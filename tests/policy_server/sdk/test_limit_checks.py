"""The SDK's values are built inside the reply contract: every limit of its JSON Schema is walked.

For each limit (``limit_checks.LIMITS``, read off ``WebhookReply``'s schema) the SDK value
that carries the field is built at the edge (accepted, and the contract's own pydantic check
takes the encoded reply) and one step past it (refused with a ``ValueError`` naming the field and
the limit, while the contract refuses the same value written into the boundary reply). A limit
no SDK value can reach fails the walk, so a new limit in the contract must be mapped here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest
from pydantic import ValidationError

from bridge.contract import WebhookReply
from policy_server.engine.reply import encode_reply
from policy_server.sdk import limit_checks, oci
from policy_server.sdk.decision import (
    REMOVAL_FIELDS,
    Adjustment,
    ContainerUpdate,
    Decision,
    Eviction,
)
from policy_server.sdk.decision_merge import merge
from policy_server.sdk.limit_checks import LIMITS, Limit, fit_reject, fit_warnings
from policy_server.sdk.oci import Device, DeviceRule, Hook, HookStage, Rlimit, StagedHook
from policy_server.sdk.resource_patch import SCALAR_PATHS, ResourcePatch

Build = Callable[[Any], Decision]
RESOURCES = "linux/resources/"


def _nested(path: list[str], value: Any) -> Any:
    """The JSON holding ``value`` at ``path`` (``[]``: a one-item list)."""
    if not path:
        return value
    head, *rest = path
    return [_nested(rest, value)] if head == "[]" else {head: _nested(rest, value)}


def _resource_builders(where: str, wrap: Callable[[ResourcePatch], Decision]) -> dict[str, Build]:
    def scalar(name: str) -> Build:
        return lambda v: wrap(ResourcePatch(**{name: v}))

    def device_rule(key: str) -> Build:
        return lambda v: wrap(
            ResourcePatch(device_rules=(DeviceRule(True, "rwm", "c", **{key: v}),)))

    out: dict[str, Build] = {
        f"{where}{RESOURCES}{'/'.join(path)}": scalar(name)
        for name, path in SCALAR_PATHS.items()
        if f"{where}{RESOURCES}{'/'.join(path)}" in LIMITS}  # the integers
    out[f"{where}{RESOURCES}hugepage_limits/[]/limit"] = lambda v: wrap(
        ResourcePatch(hugepage_limits={"2MB": v}))
    out[f"{where}{RESOURCES}hugepage_limits/[]/page_size"] = lambda v: wrap(
        ResourcePatch(hugepage_limits={v: 0}))
    for key in ("major", "minor"):
        out[f"{where}{RESOURCES}devices/[]/{key}"] = device_rule(key)
    return out


def _typed_builders() -> dict[str, Build]:
    """Reply path -> a decision whose typed SDK value carries ``v`` there."""
    out: dict[str, Build] = {
        "update/[]/container_id": lambda v: Decision(
            update=(ContainerUpdate(v, ResourcePatch(cpu_shares=2)),)),
        "evict/[]/container_id": lambda v: Decision(evict=(Eviction(v),)),
        "reject/reason": lambda v: Decision(reject=v),
        "warnings": lambda v: Decision(warnings=v),
        "adjust/linux/oom_score_adj": lambda v: Decision(adjust=Adjustment(oom_score_adj=v)),
        "adjust/rlimits/[]/soft": lambda v: Decision(
            adjust=Adjustment(rlimits=(Rlimit("RLIMIT_NOFILE", v, 0),))),
        "adjust/rlimits/[]/hard": lambda v: Decision(
            adjust=Adjustment(rlimits=(Rlimit("RLIMIT_NOFILE", 0, v),))),
    }
    out |= _resource_builders("adjust/", lambda p: Decision(adjust=Adjustment(resources=p)))
    out |= _resource_builders(
        "update/[]/", lambda p: Decision(update=(ContainerUpdate("c", p),)))

    def device(key: str) -> Build:
        base = {"major": 1, "minor": 1}
        return lambda v: Decision(
            adjust=Adjustment(devices=(Device("/dev/x", "c", **{**base, key: v}),)))

    def hook(stage: HookStage) -> Build:
        return lambda v: Decision(
            adjust=Adjustment(hooks=(StagedHook(stage, Hook("/bin/true", timeout_s=v)),)))

    for key in ("major", "minor", "file_mode", "uid", "gid"):
        out[f"adjust/linux/devices/[]/{key}"] = device(key)
    for stage in HookStage:
        out[f"adjust/hooks/{stage.value}/[]/timeout"] = hook(stage)

    def removal(name: str) -> Build:
        return lambda v: Decision(adjust=Adjustment(**{name: (v,)}))  # type: ignore[arg-type]

    for key, name in REMOVAL_FIELDS.items():
        out[f"adjust/remove/{key}/[]"] = removal(name)
    return out


TYPED = _typed_builders()


def builder(path: str) -> Build:
    """The typed SDK value for ``path``, else ``Adjustment.extra`` (the untyped rest of
    ``adjust``, checked against the contract when built)."""
    if path in TYPED:
        return TYPED[path]
    assert path.startswith("adjust/"), f"no SDK value carries {path}"
    return lambda v: Decision(adjust=Adjustment(extra=_nested(path.split("/")[1:], v)))


def edges(limit: Limit) -> tuple[list[Any], list[tuple[Any, str]]]:
    """Values at the limit, and values past it with the number the refusal must name."""
    inside: list[Any] = []
    outside: list[tuple[Any, str]] = []
    if limit.minimum is not None:
        inside.append(limit.minimum)
        outside += [(limit.minimum - 1, str(limit.minimum)), (True, "")]
    if limit.maximum is not None:
        inside.append(limit.maximum)
        outside.append((limit.maximum + 1, str(limit.maximum)))
    if limit.min_length:
        inside.append("x" * limit.min_length)
        outside.append(("x" * (limit.min_length - 1), str(limit.min_length)))
    if limit.max_length is not None:
        inside.append("x" * limit.max_length)
        outside.append(("x" * (limit.max_length + 1), str(limit.max_length)))
    if limit.max_items is not None:
        inside.append(tuple(f"w{i}" for i in range(limit.max_items)))
        outside.append((tuple(f"w{i}" for i in range(limit.max_items + 1)),
                        str(limit.max_items)))
    return inside, outside


def _put(reply: Any, path: list[str], value: Any) -> None:
    """Write ``value`` at ``path`` into a reply's JSON (``[]``: the first item)."""
    *parents, leaf = path
    for part in parents:
        reply = reply[0] if part == "[]" else reply[part]
    reply[0 if leaf == "[]" else leaf] = list(value) if isinstance(value, tuple) else value


def problems(path: str, limit: Limit) -> list[str]:
    """What is wrong with the SDK's check of one limit (empty: the SDK is the contract here)."""
    build = builder(path)
    found: list[str] = []
    inside, outside = edges(limit)
    if not outside:
        found.append(f"{path}: no value past {limit}")
    boundary: dict[str, Any] | None = None
    for value in inside:
        try:
            body = encode_reply(build(value))
        except ValueError as exc:
            found.append(f"{path}: {value!r} at the limit refused: {exc}")
            continue
        WebhookReply.model_validate_json(body)  # the contract's own check takes it
        boundary = WebhookReply.model_validate_json(body).model_dump(exclude_none=True)
    for value, number in outside:
        if boundary is not None:  # the contract refuses it: the edge is the contract's
            reply = dict(boundary)
            _put(reply, path.split("/"), value)
            with pytest.raises(ValidationError):
                WebhookReply.model_validate(reply, strict=True)
        try:
            build(value)
        except ValueError as exc:
            if number not in str(exc) or path.split("/")[-1] not in str(exc):
                found.append(f"{path}: refusal of {value!r} names no field/limit: {exc}")
        else:
            found.append(f"{path}: {str(value)[:40]} past the limit accepted")
    return found


def test_the_contract_has_the_limits_the_sdk_must_keep() -> None:
    """The walk found the schema's limits (a walker that finds none would make the test below
    pass on nothing)."""
    assert LIMITS["warnings"].max_items == limit_checks.MAX_WARNINGS == 100
    assert LIMITS["reject/reason"] == Limit("reject/reason", min_length=1, pattern=r"\S")
    assert LIMITS["update/[]/container_id"].min_length == 1
    assert LIMITS["adjust/rlimits/[]/soft"] == Limit("adjust/rlimits/[]/soft", 0, 2**64 - 1)
    assert len(LIMITS) > 50 and set(TYPED) <= set(LIMITS)


# The bounds (numbers, lengths, counts); the grammars, key rules and quota's alternatives are
# walked by tests/bridge/contract/test_value_ranges.py, with the bridge and the published schema.
BOUNDS = sorted(p for p, limit in LIMITS.items() if limit.plain() and not p.endswith("/{key}"))


@pytest.mark.parametrize("path", BOUNDS)
def test_every_sdk_value_refuses_what_the_contract_refuses(path: str) -> None:
    assert problems(path, LIMITS[path]) == []


def test_the_walk_fails_when_the_sdk_check_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mutation: with the SDK's check a no-op, every typed path is reported (past values
    accepted), so the walk above is not vacuous."""
    monkeypatch.setattr(Limit, "refusal", lambda self, value: None)
    for path in (p for p in TYPED if p in BOUNDS):
        assert any("past the limit accepted" in p for p in problems(path, LIMITS[path])), path


def test_the_walk_fails_when_a_limit_is_off_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mutations: an SDK check one wider than the contract is reported (a value past the
    contract's edge accepted); a schema misread the same way by the walk and the SDK is caught
    by the contract's own pydantic check of the encoded reply."""
    path = "adjust/rlimits/[]/soft"
    wide = Limit(path, -1, 2**64 - 1)
    def wide_check(rlimit: Rlimit) -> None:
        if wide.refusal(rlimit.soft) is not None:
            raise ValueError(f"Rlimit.soft: {wide.refusal(rlimit.soft)} ({path})")

    monkeypatch.setattr(oci, "_check_rlimit", wide_check)
    assert problems(path, LIMITS[path]) == [f"{path}: -1 past the limit accepted"]
    with pytest.raises(ValidationError):
        problems(path, wide)


def test_the_reply_of_merged_valid_decisions_is_valid() -> None:
    """The merge joins everything (fitted nowhere but at the encoder); in the reply, warnings
    past the contract's maxItems are cut with a note, a joined reason past its maxLength ends
    in '...', and the reply is inside the contract."""
    many = tuple(f"w{i}" for i in range(100))
    merged = merge([("a", Decision(warnings=many, reject="x" * 4096)),
                    ("b", Decision(warnings=many, reject="y"))]).decision
    assert merged.warnings == many + many  # joined, not yet fitted
    reply = orjson.loads(encode_reply(merged, ("note",)))
    assert len(reply["warnings"]) == 100 and reply["warnings"][-1] == "... and 102 more warnings"
    reason = reply["reject"]["reason"]
    assert len(reason) == 4096 and reason.startswith("a: xxx") and reason.endswith("...")
    WebhookReply.model_validate(reply, strict=True)
    assert fit_warnings(many) is many and fit_reject("r") == "r" and fit_reject(None) is None
