"""The SDK's values are built with the reply contract's JSON types: every typed field is walked.

Every field of every SDK type a reply is made of (found by walking the dataclasses, so a new
field is walked too) is built with a value of the wrong type, derived from its Python type; the
build raises ``ValueError`` naming the field. A value of the right type for every field builds
and encodes to a reply the contract takes. Through the real route, a handler that builds
``Adjustment(env={"A": 1})`` gets its policy's failure policy, never a 200 the bridge refuses.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping
from types import NoneType, UnionType
from typing import Any, Union, get_args, get_origin, get_type_hints

import pytest

from bridge.contract import WebhookReply
from policy_server import Event, EventName, FailurePolicy, Policy
from policy_server.engine.reply import encode_reply
from policy_server.http_edge.hot_route import evaluate_body
from policy_server.sdk import limit_checks
from policy_server.sdk.decision import Adjustment, ContainerUpdate, Decision, Eviction
from policy_server.sdk.effects import CgroupWrite
from policy_server.sdk.limit_checks import checks
from policy_server.sdk.oci import Device, DeviceRule, Hook, HookStage, Mount, Rlimit, StagedHook
from policy_server.sdk.resource_patch import ResourcePatch
from policy_server.service import PolicyServer, ServerOptions
from tests.policy_server.engine.test_request_path import CREATE

# Every SDK type a reply is made of, with the fields it cannot be built without.
REQUIRED: dict[type, dict[str, Any]] = {
    Adjustment: {},
    ContainerUpdate: {"container_id": "c", "resources": ResourcePatch()},
    Eviction: {"container_id": "c"},
    Decision: {},
    ResourcePatch: {},
    Hook: {"path": "/bin/true"},
    StagedHook: {"stage": HookStage.PRESTART, "hook": Hook("/bin/true")},
    Device: {"path": "/dev/x", "type": "c", "major": 1, "minor": 1},
    Rlimit: {"type": "RLIMIT_NOFILE", "soft": 1, "hard": 1},
    DeviceRule: {"allow": True},
    Mount: {"destination": "/m"},
}
# A valid value of each SDK type a field may hold.
EXAMPLES: dict[type, Any] = {
    **{cls: cls(**kwargs) for cls, kwargs in REQUIRED.items() if cls is not StagedHook},
    StagedHook: StagedHook(HookStage.PRESTART, Hook("/bin/true")),
    HookStage: HookStage.POSTSTOP,
    CgroupWrite: CgroupWrite("kubepods", "cpu.shares", 2),
}
CHECKED_ELSEWHERE = {(Adjustment, "extra")}  # the contract model checks it as a whole


def _names(cls: type) -> list[str]:
    if dataclasses.is_dataclass(cls):
        return [f.name for f in dataclasses.fields(cls)]
    return list(cls._fields)  # type: ignore[attr-defined]  # a named tuple


def _bare(hint: Any) -> Any:
    """``hint`` without ``| None``."""
    if get_origin(hint) in (Union, UnionType) and NoneType in get_args(hint):
        rest = [a for a in get_args(hint) if a is not NoneType]
        return rest[0] if len(rest) == 1 else Union[tuple(rest)]  # noqa: UP007
    return hint


def _wrong(hint: Any) -> list[tuple[Any, str]]:
    """Values of the wrong JSON type for ``hint``, each with what the refusal must name past the
    field (``[1]``: the item)."""
    hint = _bare(hint)
    origin, args = get_origin(hint), get_args(hint)
    if hint is str:
        return [(1, ""), (b"x", "")]
    if hint is int:
        return [("1", ""), (True, ""), (1.0, "")]
    if hint is bool:
        return [(1, ""), ("true", "")]
    if origin is tuple:
        item = _wrong(args[0])[0][0]
        return [((_right(args[0]), item), "[1]"), ("ab", ""), ({"a": 1}, "")]
    if origin is Mapping:
        key, value = _right(args[0]), _right(args[1])
        return [({key: _wrong(args[1])[0][0]}, f"[{key!r}]"), ({1: value}, "[1]"), ([1], "")]
    return [(object(), ""), ({}, "")]  # an SDK value's class


def _right(hint: Any) -> Any:
    hint = _bare(hint)
    origin, args = get_origin(hint), get_args(hint)
    if hint in (str, int, bool):
        return {str: "x", int: 1, bool: True}[hint]
    if origin is tuple:
        return (_right(args[0]),)
    if origin is Mapping:
        return {_right(args[0]): _right(args[1])}
    if origin in (Union, UnionType):
        return EXAMPLES[args[0]]
    return EXAMPLES[hint]


def _build(cls: type, **values: Any) -> Any:
    built = cls(**{**REQUIRED[cls], **values})
    return Adjustment(mounts=(built,)) if cls is Mount else built  # sent with an adjustment


def typed_fields() -> list[tuple[type, str, Any, str]]:
    out = []
    for cls in REQUIRED:
        hints = get_type_hints(cls)
        for name in _names(cls):
            if (cls, name) in CHECKED_ELSEWHERE:
                continue
            wrong = _wrong(hints[name])
            if _bare(hints[name]) is hints[name]:  # None only where the type says "| None"
                wrong.append((None, ""))
            out += [(cls, name, value, where) for value, where in wrong]
    return out


FIELDS = typed_fields()


def _stable(value: Any) -> str:
    """The value as a test id that is the same in every process (xdist's workers must
    collect the same ids): a bare object's repr names its address."""
    return re.sub(r" at 0x[0-9a-f]+", "", repr(value))


@pytest.mark.parametrize(("cls", "name", "value", "where"), FIELDS,
                         ids=[f"{c.__name__}.{n}={_stable(v)}" for c, n, v, _ in FIELDS])
def test_every_typed_field_refuses_a_value_of_the_wrong_type(
        cls: type, name: str, value: Any, where: str) -> None:
    with pytest.raises(ValueError, match=r"must be a") as refused:
        _build(cls, **{name: value})
    assert str(refused.value).startswith(f"{cls.__name__}.{name}{where}: "), refused.value


def test_the_walk_covers_every_field() -> None:
    """Not vacuous: every type and field is there (a new field joins by itself)."""
    walked = {(c, n) for c, n, _, _ in FIELDS}
    assert walked | CHECKED_ELSEWHERE == {(c, n) for c in REQUIRED for n in _names(c)}
    assert (Adjustment, "env") in walked and (ResourcePatch, "unified") in walked


@pytest.mark.parametrize("cls", list(REQUIRED), ids=lambda c: c.__name__)
def test_a_value_of_the_right_type_for_every_field_builds_a_valid_reply(cls: type) -> None:
    hints = get_type_hints(cls)
    values = {name: _right(hints[name]) for name in _names(cls)
              if (cls, name) not in CHECKED_ELSEWHERE and name not in REQUIRED[cls]}
    if cls is DeviceRule:
        values |= {"type": "c", "access": "rwm"}  # the contract's values, not only its types
    if cls is Adjustment:  # the contract's grammars (bridge.contract.value_rules)
        values |= {"remove_mounts": ("/m",), "remove_devices": ("/dev/x",)}
    if cls is ResourcePatch:  # and its ranges
        values |= {"cpu_shares": 2, "cpu_quota": -1, "cpu_period": 1000, "cpu_cpus": "0",
                   "cpu_mems": "0", "unified": {"memory.high": "max"}}
    built = _build(cls, **values)
    decision = {
        Adjustment: lambda v: Decision(adjust=v),
        ContainerUpdate: lambda v: Decision(update=(v,)),
        Eviction: lambda v: Decision(evict=(v,)),
        Decision: lambda v: Decision(warnings=v.warnings, reject=v.reject),
        ResourcePatch: lambda v: Decision(adjust=Adjustment(resources=v)),
        Hook: lambda v: Decision(adjust=Adjustment(hooks=(StagedHook(HookStage.PRESTART, v),))),
        StagedHook: lambda v: Decision(adjust=Adjustment(hooks=(v,))),
        Device: lambda v: Decision(adjust=Adjustment(devices=(v,))),
        Rlimit: lambda v: Decision(adjust=Adjustment(rlimits=(v,))),
        DeviceRule: lambda v: Decision(adjust=Adjustment(
            resources=ResourcePatch(device_rules=(v,)))),
        Mount: lambda v: Decision(adjust=v),
    }[cls](built)
    WebhookReply.model_validate_json(encode_reply(decision), strict=True)


def test_a_python_type_the_contract_disagrees_with_is_refused_when_the_check_is_made() -> None:
    """The field's Python type and the schema's JSON type must agree, and every plain field
    needs a reply path: a mistake in the SDK fails at import, not on a request."""
    with pytest.raises(TypeError, match=r"Eviction.container_id: the contract has integer at "
                       r"adjust/rlimits/\[\]/soft, the SDK <class 'str'>"):
        checks(Eviction, {"container_id": "adjust/rlimits/[]/soft", "reason": "evict/[]/reason"})
    with pytest.raises(TypeError, match=r"Rlimit\.type: .* goes nowhere"):
        checks(Rlimit, {"soft": "adjust/rlimits/[]/soft"})
    with pytest.raises(TypeError, match="no fields"):
        checks(Rlimit, {"nofield": "adjust/rlimits/[]/soft"})
    assert checks(Eviction, {"container_id": "evict/[]/container_id",
                             "reason": "evict/[]/reason"})(Eviction("c")) is None


def test_the_walk_fails_when_the_type_check_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mutation: with every refusal a no-op, no wrong value is refused naming its field (so the
    walk above would report each one)."""
    monkeypatch.setattr(limit_checks._Shape, "refusal", lambda self, value: None)
    for cls, name, value, _ in FIELDS:
        try:
            _build(cls, **{name: value})
        except ValueError:
            pytest.fail(f"{cls.__name__}.{name}={value!r} refused with the check off")
        except (AttributeError, TypeError):  # a value read as the type it is not (no refusal)
            pass


def _bad_env(failure: FailurePolicy) -> Policy[None]:
    policy = Policy("bad-env", failure_policy=failure)

    @policy.on(EventName.CREATE_CONTAINER)
    def untyped(event: Event) -> Decision:
        return Decision(adjust=Adjustment(env={"A": 1}))  # type: ignore[dict-item]

    return policy


NAMED = "Adjustment.env['A']: must be a string, got int (reply contract: adjust/env/[]/value)"


@pytest.mark.parametrize("failure", [FailurePolicy.FAIL, FailurePolicy.IGNORE])
async def test_a_wrong_type_through_the_route_is_the_failure_policys_outcome(
        failure: FailurePolicy) -> None:
    """Not a 200 with an ``adjust`` the bridge would refuse: Fail rejects with a reason naming
    the field, Ignore answers with a warning naming it."""
    server = PolicyServer(ServerOptions(default_policies=False), [_bad_env(failure)])
    status, body = await evaluate_body(server, "bad-env", CREATE)
    reply = json.loads(body)
    assert status == 200 and "adjust" not in reply
    WebhookReply.model_validate_json(body, strict=True)
    if failure is FailurePolicy.FAIL:
        assert list(reply) == ["reject"] and NAMED in reply["reject"]["reason"]
    else:
        assert list(reply) == ["warnings"] and any(NAMED in w for w in reply["warnings"])


def test_refusals_name_the_field_and_the_item() -> None:
    """The brief's examples, and a ``Mount`` (checked by the Adjustment that sends it)."""
    with pytest.raises(ValueError, match=r"^Mount\.options\[0\]: must be a string"):
        Adjustment(mounts=(Mount("/m", options=(1,)),))  # type: ignore[arg-type]
    builders: dict[str, Callable[[], Any]] = {
        "ResourcePatch.cpu_shares": lambda: ResourcePatch(cpu_shares="5"),  # type: ignore[arg-type]
        "Adjustment.args[0]": lambda: Adjustment(args=(1,)),  # type: ignore[arg-type]
        "Adjustment.sysctl['k']": lambda: Adjustment(sysctl={"k": 1}),  # type: ignore[dict-item]
    }
    for name, build in builders.items():
        with pytest.raises(ValueError) as refused:
            build()
        assert str(refused.value).startswith(f"{name}: must be a")
