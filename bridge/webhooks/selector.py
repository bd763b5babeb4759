"""Which pods a webhook wants to see, decided inside the bridge.

A selector that does not match costs no HTTP call. Semantics follow
Kubernetes: `pod_label_selector` is a LabelSelector (`matchLabels` and
`matchExpressions` with In / NotIn / Exists / DoesNotExist, all ANDed);
an empty selector matches every pod. Annotation requirements look at the
pod's annotations: a null value means "present", a string or a list of
strings means "present with one of these values".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from bridge.proto.nri import api_pb2 as api


class Operator(Enum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: Operator
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator is Operator.IN:
            return present and labels[self.key] in self.values
        if self.operator is Operator.NOT_IN:
            return not present or labels[self.key] not in self.values
        if self.operator is Operator.EXISTS:
            return present
        return not present


@dataclass(frozen=True, slots=True)
class Selector:
    namespaces: frozenset[str] | None = None
    exclude_namespaces: frozenset[str] = frozenset()
    labels: tuple[Requirement, ...] = ()
    annotations: tuple[tuple[str, frozenset[str] | None], ...] = ()
    runtime_handlers: frozenset[str] | None = None

    @property
    def matches_all(self) -> bool:
        return (self.namespaces is None and not self.exclude_namespaces and not self.labels
                and not self.annotations and self.runtime_handlers is None)

    def matches(self, pod: api.PodSandbox | None) -> bool:
        """Whether an event about `pod` goes to this webhook (no pod: only if unrestricted)."""
        if self.matches_all:
            return True
        if pod is None:
            return False
        if self.namespaces is not None and pod.namespace not in self.namespaces:
            return False
        if pod.namespace in self.exclude_namespaces:
            return False
        if self.runtime_handlers is not None and pod.runtime_handler not in self.runtime_handlers:
            return False
        labels = pod.labels
        if not all(req.matches(labels) for req in self.labels):
            return False
        annotations = pod.annotations
        for key, values in self.annotations:
            if key not in annotations:
                return False
            if values is not None and annotations[key] not in values:
                return False
        return True
