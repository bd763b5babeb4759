"""``ulimit-adjuster``: POSIX rlimits for a container from its pod's annotations.

Owns the annotation format and the checks: ``ulimits.noderesource.dev/container.<name>`` (or
``.../pod`` for every container) holds a YAML list of ``{type, soft, hard}``; ``type`` is an
rlimit name in any spelling (``RLIMIT_NOFILE``, ``nofile``); ``soft``/``hard`` are integers or
``unlimited``; soft must not exceed hard. An annotation may lower a limit the runtime gave the
container (the request's rlimits, the floor of authority); it may raise a hard limit above that,
or set one the runtime did not, only up to the ``max`` the configuration names for the type
(docs/security.md#pod-metadata-is-input-not-authority). ``namespaces`` (default every
namespace) limits which pods' annotations are read at all. A malformed, over-the-cap or
out-of-scope annotation rejects CreateContainer with a reason naming the annotation. Must not
do I/O. The webhook needs ``allow: [rlimits]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import policy_server.policies.pod_annotations as notes
from policy_server.policies.pod_annotations import NamespaceScope, PodAnnotationError
from policy_server.policies.policy_config import AnyMapping, PolicyConfig, PolicySettings, Strings
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
    """The configuration: the highest hard limit an annotation may ask for, per type, and the
    namespaces whose pods may ask."""

    max_hard: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    namespaces: NamespaceScope = field(default_factory=lambda: NamespaceScope(frozenset("*")))


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
        raise PodAnnotationError(key, f"{where}: {number} does not fit in 64 bits")
    return number


def _shown(value: int) -> str:
    return "unlimited" if value == UNLIMITED else str(value)


def _check_raise(key: str, kind: str, hard: int, runtime: Rlimit | None, limits: Limits) -> None:
    """A hard limit above the runtime's (or one the runtime did not set) needs a cap."""
    cap = limits.max_hard.get(kind)
    if cap is not None:
        if hard > cap:
            raise PodAnnotationError(
                key, f"{kind}: hard limit {_shown(hard)} exceeds this node's maximum {cap}"
            )
        return
    if runtime is not None and hard <= runtime.hard:
        return
    floor = f"the runtime's {_shown(runtime.hard)}" if runtime is not None else "the runtime's"
    name = kind.removeprefix("RLIMIT_").lower()
    raise PodAnnotationError(
        key, f"{kind}: hard limit {_shown(hard)} raises {floor} default and this node sets no "
        f"maximum for it (max.{name})",
    )  # fmt: skip


def parse_rlimits(
    request: notes.AnnotationRequest, limits: Limits, runtime: tuple[Rlimit, ...] = ()
) -> tuple[Rlimit, ...]:
    """The rlimits asked for; ``runtime`` the container's own (what an annotation may lower)."""
    given = {r.type: r for r in runtime}
    out: dict[str, Rlimit] = {}
    for i, item in enumerate(notes.as_list(request)):
        where = f"item {i}"
        if not isinstance(item, dict):
            raise PodAnnotationError(
                request.key, f"{where}: expected a mapping with type, soft, hard")
        notes.check_fields(request.key, where, item, _FIELDS)
        kind = rlimit_type(item.get("type"))
        if kind is None:
            known = ", ".join(sorted(t.removeprefix("RLIMIT_").lower() for t in RLIMIT_TYPES))
            raise PodAnnotationError(
                request.key, f"{where}: unknown rlimit type {item.get('type')!r} (known: {known})"
            )
        if "hard" not in item:
            raise PodAnnotationError(request.key, f"{where} ({kind}): hard is required")
        hard = _value(request.key, f"{where} ({kind}).hard", item["hard"])
        soft = _value(request.key, f"{where} ({kind}).soft", item.get("soft", item["hard"]))
        if soft > hard:
            raise PodAnnotationError(request.key, f"{kind}: soft limit {soft} exceeds hard {hard}")
        if kind in out:
            raise PodAnnotationError(request.key, f"{kind} is given twice")
        _check_raise(request.key, kind, hard, given.get(kind), limits)
        out[kind] = Rlimit(kind, soft, hard)
    return tuple(out.values())


class _Config(PolicyConfig):
    max: AnyMapping = {}
    namespaces: Strings = None


def _limits_from(settings: PolicySettings) -> Limits:
    caps: dict[str, int] = {}
    config = settings.parse(_Config)
    for name, value in config.max.items():
        kind = rlimit_type(name)
        if kind is None:
            raise settings.error(f"max.{name}", "unknown rlimit type")
        if isinstance(value, str) and value.strip().lower() == "unlimited":
            value = UNLIMITED
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= UNLIMITED:
            raise settings.error(
                f"max.{name}", f"expected a non-negative integer or unlimited, got {value!r}"
            )
        caps[kind] = value
    return Limits(MappingProxyType(caps), NamespaceScope.of(config.namespaces, ("*",)))


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
            refused = limits.namespaces.refusal(event, request.key, "rlimits")
            if refused is not None:
                raise refused
            runtime = event.container.rlimits if event.container is not None else ()
            found = parse_rlimits(request, limits, runtime)
        except PodAnnotationError as exc:
            return Decision(reject=str(exc))
        return Decision(adjust=Adjustment(rlimits=found))

    return policy
