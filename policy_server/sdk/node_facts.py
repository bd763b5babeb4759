"""Facts about the node the policy server runs on, found out once at start-up.

Owns ``NodeFacts``: what a policy may need to know about the host to answer correctly, but
cannot see in an event. Today that is the cgroup version: runc refuses any ``unified`` key of a
container's resources on cgroup v1 ("cannot use unified on cgroup v1"), so a policy that sets
one there makes the container fail to start. The server builds the facts from its own probe
(``--cgroup-root``, ``--cgroup-version``); handlers read them as ``node.facts`` (the
``NodeView``), koordinator-qos through its context. Must not do I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

CgroupVersionFact = Literal[1, 2] | None


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What is known about the node; ``None`` means "not known" (the server cannot see it)."""

    cgroup_version: CgroupVersionFact = None

    @property
    def unified_allowed(self) -> bool:
        """False on cgroup v1, where the runtime rejects a container with ``unified`` keys."""
        return self.cgroup_version != 1

    def to_json(self) -> dict[str, Any]:
        return {"cgroup_version": self.cgroup_version, "unified_allowed": self.unified_allowed}


UNKNOWN_NODE = NodeFacts()
