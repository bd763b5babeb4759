"""``ulimit-adjuster``: POSIX rlimits for a container from its pod's annotations.

Owns the annotation format and the checks: ``ulimits.noderesource.dev/container.<name>`` (or
``.../pod`` for every container) holds a YAML list of ``{type, soft, hard}``; ``type`` is an
rlimit name in any spelling (``RLIMIT_NOFILE``, ``nofile``); ``soft``/``hard`` are integers or
``unlimited``; soft must not exceed hard. The optional ``max`` table in the configuration caps
the hard limit per type. A malformed or over-the-cap annotation rejects CreateContainer with a
reason naming the annotation. Must not do I/O. The webhook needs ``allow: [rlimits]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import policy_server.policies.pod_annotations as notes
from policy_server.policies.pod_annotations import AnnotationError
from policy_server.policies.policy_config import AnyMapping, PolicyConfig, PolicySettings
from policy_server.sdk import Adjustment, Decision, Event, EventName, FailurePolicy, Policy, Rlimit

NAME = "ulimit-adjuster"
DESCRIPTION = "rlimits (ulimits) for containers from pod annotations"
DOMAIN = "ulimits.noderesource.dev"
UNLIMITED = 2**64 - 1  # RLIM_INFINITY as the OCI spec's uint64

# Linux rlimits (getrlimit(2)); OCI names them RLIMIT_*.
RLIMIT_TYPES = frozenset(
    f"RLIMIT_{n}"
    for n in (
        "AS", "CORE", "CPU", "DATA", "FSIZE", "LOCKS", "MEMLOCK", "MSGQUEUE", "NICE",
        "NOFILE", "NPROC", "RSS", "RTPRIO", "RTTIME", "SIGPENDING", "STACK",
    )
)  # fmt: skip
_FIELDS = frozenset({"type", "soft", "hard"})


@dataclass(frozen=True, slots=True)
class Limits:
    """The configuration: the highest hard limit an annotation may ask for, per type."""

    max_hard: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))


def rlimit_type(name: object) -> str | None:
    """``nofile``, ``NOFILE``, ``RLIMIT_NOFILE`` -> ``RLIMIT_NOFILE``; None if unknown."""
    if not isinstance(name, str):
        return None
    upper = name.strip().upper()
    full = upper if upper.startswith("RLIMIT_") else f"RLIMIT_{upper}"
    return full if full in RLIMIT_TYPES else None


def _value(key: str, where: str, value: object) -> int:
    if isinstance(value, str) and value.strip().lower() in ("unlimited", "infinity", "-1"):
        return UNLIMITED
    if value == -1:
        return UNLIMITED
    number = notes.non_negative_int(key, where, value)
    if number > UNLIMITED:
        raise AnnotationError(key, f"{where}: {number} does not fit in 64 bits")
    return number


def parse_rlimits(request: notes.Request, limits: Limits) -> tuple[Rlimit, ...]:
    out: dict[str, Rlimit] = {}
    for i, item in enumerate(notes.as_list(request)):
        where = f"item {i}"
        if not isinstance(item, dict):
            raise AnnotationError(request.key, f"{where}: expected a mapping with type, soft, hard")
        notes.check_fields(request.key, where, item, _FIELDS)
        kind = rlimit_type(item.get("type"))
        if kind is None:
            known = ", ".join(sorted(t.removeprefix("RLIMIT_").lower() for t in RLIMIT_TYPES))
            raise AnnotationError(
                request.key, f"{where}: unknown rlimit type {item.get('type')!r} (known: {known})"
            )
        if "hard" not in item:
            raise AnnotationError(request.key, f"{where} ({kind}): hard is required")
        hard = _value(request.key, f"{where} ({kind}).hard", item["hard"])
        soft = _value(request.key, f"{where} ({kind}).soft", item.get("soft", item["hard"]))
        if soft > hard:
            raise AnnotationError(request.key, f"{kind}: soft limit {soft} exceeds hard {hard}")
        cap = limits.max_hard.get(kind)
        if cap is not None and hard > cap:
            shown = "unlimited" if hard == UNLIMITED else str(hard)
            raise AnnotationError(
                request.key, f"{kind}: hard limit {shown} exceeds this node's maximum {cap}"
            )
        if kind in out:
            raise AnnotationError(request.key, f"{kind} is given twice")
        out[kind] = Rlimit(kind, soft, hard)
    return tuple(out.values())


class _Config(PolicyConfig):
    max: AnyMapping = {}


def _limits_from(settings: PolicySettings) -> Limits:
    caps: dict[str, int] = {}
    for name, value in settings.parse(_Config).max.items():
        kind = rlimit_type(name)
        if kind is None:
            raise settings.error(f"max.{name}", "unknown rlimit type")
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise settings.error(f"max.{name}", f"expected a non-negative integer, got {value!r}")
        caps[kind] = value
    return Limits(MappingProxyType(caps))


def build(settings: PolicySettings) -> Policy[Limits]:
    limits = _limits_from(settings)
    # A bug in here must not start the container without what it asked for.
    policy = Policy(
        NAME, context=lambda: limits, description=DESCRIPTION, failure_policy=FailurePolicy.FAIL
    )

    @policy.on(EventName.CREATE_CONTAINER)
    def rlimits(event: Event, limits: Limits) -> Decision | None:
        try:
            request = notes.find(event, DOMAIN)
            if request is None:
                return None
            found = parse_rlimits(request, limits)
        except AnnotationError as exc:
            return Decision(reject=str(exc))
        return Decision(adjust=Adjustment(rlimits=found))

    return policy
