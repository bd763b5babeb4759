"""The reply a policy returns (pydantic models), with every value rule of the contract.

The reply's NRI messages are the request's shape (nri_models) refined by
bridge.contract.value_rules: a range becomes ``minimum``/``maximum`` (an ``anyOf`` for quota's
"-1 or at least 1000"), a grammar a ``pattern`` (and a ``format`` where a pattern cannot say all)
with the rule's own check as the validator, a map's key grammar ``propertyNames``; the reply's
limits (warnings, the reject reason) and the removal keys come from the same module. The models
keep NRI's message names, so a reference into reply.schema.json (``#/$defs/Mount``) holds. The
request's models (webhook_models) stay unrefined: a runtime's values are what they are.

Owns the reply-side models and how a rule becomes a pydantic type. Must not hold a number or a
grammar of its own (they are value_rules'), or be imported on the bridge's serving path.
"""

from __future__ import annotations

from typing import Annotated, Any, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model

from bridge.contract import value_rules as vr
from bridge.contract.nri_models import NriModel, build_model
from bridge.proto.nri import api_pb2

_ABSENT = "absent: left as it is (the runtime's value, or what other plugins set)"


def _resolve() -> dict[tuple[str, str], vr.Rule]:
    """(NRI message, field) -> its rule, found by walking each rule's path from
    ContainerAdjustment (an update's LinuxContainerUpdate reaches the same LinuxResources)."""
    out: dict[tuple[str, str], vr.Rule] = {}
    for rule in vr.RULES:
        desc = api_pb2.ContainerAdjustment.DESCRIPTOR
        names = rule.path.replace("[]", "").split(".")
        for name in names[:-1]:
            inner = desc.fields_by_name[name].message_type
            assert inner is not None, f"value rule {rule.path}: {name} holds no message"
            desc = inner
        leaf = names[-1]
        assert leaf in desc.fields_by_name, f"value rule {rule.path}: no field {leaf}"
        assert (desc.name, leaf) not in out, f"two rules for {desc.name}.{leaf}"
        out[(desc.name, leaf)] = rule
    return out


RULES_BY_FIELD = _resolve()


def _raise(check: Any) -> Any:
    def validate(value: Any) -> Any:
        problem = check(value)
        if problem is not None:
            raise ValueError(problem)
        return value
    return AfterValidator(validate)


def text_type(text: vr.Text) -> Any:
    """A string under ``text``'s grammar: its JSON Schema keywords, its own check."""
    extra: dict[str, Any] = {}  # JSON Schema keywords (pydantic's JsonDict)
    if text.pattern is not None:
        extra["pattern"] = text.pattern
    if text.format is not None:
        extra["format"] = text.format
    if text.min_length is not None:
        extra["minLength"] = text.min_length
    return Annotated[str, Field(strict=True, json_schema_extra=extra), _raise(text.problem)]


def _int_type(rule: vr.IntRange, typ: Any) -> Any:
    low, high = _proto_bounds(typ)
    inside = Annotated[int, Field(ge=max(rule.low, low), le=min(rule.high, high), strict=True)]
    if rule.also is None:
        return inside
    return Annotated[int, Field(ge=rule.also, le=rule.also, strict=True)] | inside


def _proto_bounds(typ: Any) -> tuple[int, int]:
    """The proto type's integer range, as nri_models typed it (``Annotated[int, Field(...)]``)."""
    found: dict[str, int] = {}
    for meta in get_args(typ)[1:]:
        for item in getattr(meta, "metadata", ()):
            for bound in ("ge", "le"):
                if getattr(item, bound, None) is not None:
                    found[bound] = getattr(item, bound)
    if set(found) != {"ge", "le"}:
        raise TypeError(f"no integer bounds in {typ}")
    return found["ge"], found["le"]


def _keys(text: vr.Text, typ: Any) -> Any:
    def check(mapping: Any) -> str | None:
        for key in mapping:
            problem = text.problem(key)
            if problem is not None:
                return problem
        return None
    names = {k: v for k, v in (("pattern", text.pattern), ("minLength", text.min_length))
             if v is not None}
    extra: dict[str, Any] = {"propertyNames": names}
    return Annotated[typ, Field(json_schema_extra=extra), _raise(check)]


def _refine(message: str, fd: Any, typ: Any) -> tuple[Any, Any]:
    rule = RULES_BY_FIELD.get((message, fd.name))
    if rule is None:
        return typ | None, Field(None, description=f"{_ABSENT.capitalize()}")
    check = rule.check
    if rule.keys:
        assert isinstance(check, vr.Text)
        refined = _keys(check, typ)
        what = f"keys: {check.says}"
    elif isinstance(check, vr.Text):
        refined = text_type(check)
        what = check.says
    else:
        refined = _int_type(check, typ)
        what = check.text()
    return refined | None, Field(None, description=f"{what}; {_ABSENT}")


REPLY_MODELS: dict[str, type[NriModel]] = {}


def reply_nri_model(name: str) -> type[NriModel]:
    """NRI message ``name`` as a reply may hold it: the value rules applied."""
    return build_model(name, REPLY_MODELS, _refine)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _removal_item(key: str) -> Any:
    names = vr.REMOVAL_NAMES[key]
    if names is None:
        return Annotated[str, Field(min_length=1, strict=True)]
    return Annotated[text_type(names), Field(min_length=1)]


Removals: Any = create_model(  # type: ignore[call-overload]
    "Removals", __base__=_Strict, __module__=__name__,
    __doc__="Entries to remove; NRI's '-' key markers are produced by the bridge.",
    **{key: (list[_removal_item(key)] | None,  # type: ignore[misc]
             Field(None, description=vr.REMOVAL_NAMES_ARE[key]))
       for key in vr.REMOVAL_KEYS})


class Adjustment(reply_nri_model("ContainerAdjustment")):  # type: ignore[misc]
    """A ContainerAdjustment (CreateContainer only) plus explicit removals."""

    remove: Removals | None = None


class Update(_Strict):
    container_id: str = Field(min_length=1)
    linux: reply_nri_model("LinuxContainerUpdate") | None = None  # type: ignore[valid-type]
    ignore_failure: bool | None = None


class Eviction(_Strict):
    container_id: str = Field(min_length=1)
    reason: str = ""


class Reject(_Strict):
    reason: str = Field(
        min_length=1, pattern=vr.REASON_PATTERN,
        description=f"not empty, not only white space; cut to {vr.MAX_REASON_CHARS} "
        "characters (a longer reason still rejects)")


Warning = Annotated[str, Field(description=f"cut to {vr.MAX_WARNING_CHARS} characters")]


class WebhookReply(_Strict):
    """A policy's answer. Every key is optional; {} means no change."""

    adjust: Adjustment | None = Field(None, description="CreateContainer only")
    update: list[Update] | None = Field(
        None, description="resource updates for existing containers (CreateContainer, "
        "UpdateContainer, StopContainer, Synchronize)")
    evict: list[Eviction] | None = Field(None, description="accepted for completeness; "
                                         "NRI runtimes drop evictions")
    reject: Reject | None = Field(None, description="fail this operation with a reason")
    warnings: list[Warning] | None = Field(
        None, max_length=vr.MAX_WARNINGS,
        description=f"at most {vr.MAX_WARNINGS} (more is refused), each cut to "
        f"{vr.MAX_WARNING_CHARS} characters")


__all__ = ["Adjustment", "Eviction", "Reject", "Removals", "Update", "WebhookReply",
           "reply_nri_model"]
