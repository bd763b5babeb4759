"""Per-container requests written as pod annotations, as NRI's sample plugins read them.

Owns the key scheme and the parsing shared by the annotation-driven policies: a request for
container ``app`` is the pod annotation ``<domain>/container.app``; ``<domain>/pod`` applies to
every container of the pod that has no container-specific one. Values are YAML (so JSON too).
Every problem is an ``AnnotationError`` naming the annotation key, which the policies turn into
a rejection. Also owns ``NamespaceScope``, the ``namespaces`` key of those policies'
configurations: the namespaces whose pods' annotations the operator lets the policy act on
(docs/security.md#pod-metadata-is-input-not-authority). Must not do I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from policy_server.policies.policy_config import describe_value
from policy_server.sdk import Event

# An annotation value is bounded by Kubernetes (256 KiB for all of a pod's annotations);
# refusing more here keeps a hostile value from costing YAML parse time.
MAX_VALUE_CHARS = 64 * 1024


class PodAnnotationError(Exception):
    """An annotation this policy reads is malformed; ``str()`` is the reject reason."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"annotation {key}: {message}")
        self.key = key


@dataclass(frozen=True, slots=True)
class AnnotationRequest:
    """The annotation that applies to the event's container: its key and parsed YAML value."""

    key: str
    value: Any


ALL_NAMESPACES = "*"


@dataclass(frozen=True, slots=True)
class NamespaceScope:
    """The namespaces a policy's configuration lists (``*``: every namespace)."""

    namespaces: frozenset[str] = frozenset()

    @classmethod
    def of(cls, names: tuple[str, ...] | None, default: tuple[str, ...] = ()) -> NamespaceScope:
        return cls(frozenset(default if names is None else names))

    def allows(self, namespace: str) -> bool:
        return ALL_NAMESPACES in self.namespaces or namespace in self.namespaces

    def refusal(self, event: Event, key: str, what: str) -> PodAnnotationError | None:
        """Why the event's pod may not ask for ``what`` through ``key``, else ``None``."""
        namespace = event.pod.namespace if event.pod is not None else ""
        if self.allows(namespace):
            return None
        return PodAnnotationError(
            key, f"{what} from annotations are not granted to pods of namespace {namespace!r} "
            "on this node (the policy's namespaces)",
        )  # fmt: skip


def container_key(domain: str, container: str) -> str:
    return f"{domain}/container.{container}"


def pod_key(domain: str) -> str:
    return f"{domain}/pod"


def find(event: Event, domain: str) -> AnnotationRequest | None:
    """The container's own annotation, else the pod-wide one, parsed; None if neither."""
    if event.pod is None or event.container is None:
        return None
    annotations: Mapping[str, str] = event.pod.annotations
    for key in (container_key(domain, event.container.name), pod_key(domain)):
        raw = annotations.get(key)
        if raw is not None:
            return AnnotationRequest(key, parse_yaml(key, raw))
    return None


def parse_yaml(key: str, raw: str) -> Any:
    if len(raw) > MAX_VALUE_CHARS:
        raise PodAnnotationError(key, f"longer than {MAX_VALUE_CHARS} characters")
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise PodAnnotationError(key, f"not valid YAML{where}: {problem}") from None


def as_list(request: AnnotationRequest) -> list[Any]:
    """The value as a list; a single mapping or string counts as a list of one."""
    value = request.value
    if isinstance(value, dict | str):
        return [value]
    if not isinstance(value, list) or not value:
        got = describe_value(value)
        raise PodAnnotationError(request.key, f"expected a non-empty list, got {got}")
    return value


def check_fields(key: str, where: str, item: Mapping[str, Any], known: frozenset[str]) -> None:
    unknown = sorted(str(k) for k in item if k not in known)
    if unknown:
        raise PodAnnotationError(
            key, f"{where}: unknown field {unknown[0]!r} (known: {', '.join(sorted(known))})"
        )


def non_negative_int(key: str, where: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PodAnnotationError(key, f"{where}: expected a non-negative integer, got {value!r}")
    return value
