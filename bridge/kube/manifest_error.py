"""The one exception `bridge.kube` raises: a manifest that cannot become a pod.

Owns: ManifestError, which names the document and the field. Must not: carry anything else.
"""

from __future__ import annotations


class ManifestError(ValueError):
    """A bad manifest: `where` names the document, `field` the path inside it."""

    def __init__(self, where: str, field: str, problem: str) -> None:
        super().__init__(f"{where}: {field}: {problem}" if field else f"{where}: {problem}")
        self.where = where
        self.field = field
        self.problem = problem
