"""Facts about the node the policy server runs on, found out once at start-up.

Owns ``NodeFacts``: what a policy may need to know about the host to answer correctly, but
cannot see in an event. runc writes every ``unified`` key of a container's resources into a
file of the container's cgroup, so a key the node cannot take stops the container from
starting: on cgroup v1 runc refuses them all ("cannot use unified on cgroup v1"); on cgroup v2
it opens ``<container cgroup>/<key>`` and fails on a file the kernel does not provide
(``unable to set unified resource "cpu.bvt_warp_ns": openat2 ...: no such file or directory``
on a stock kernel). So the facts carry the cgroup version and, on v2, the interface files a
container's cgroup has. The server builds them from its own probe (``--cgroup-root``,
``--cgroup-version``); handlers read them as ``NodeView.facts``, koordinator-qos
through its context. Must not do I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

CgroupVersionFact = Literal[1, 2] | None


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What is known about the node; ``None`` means "not known" (the server cannot see it).

    ``cgroup_files``: on cgroup v2, the interface files (``cpu.weight``, ``cpu.idle``, ...) a
    container's cgroup has on this node, as the probe found them in the kubepods cgroup; ``None``
    when nobody looked (facts built by hand, the test kit's default) or the server could not.
    """

    cgroup_version: CgroupVersionFact = None
    cgroup_files: frozenset[str] | None = None

    @property
    def unified_allowed(self) -> bool:
        """False on cgroup v1, where the runtime rejects a container with ``unified`` keys."""
        return self.cgroup_version != 1

    def has_cgroup_file(self, name: str) -> bool:
        """True only when the probe saw ``name`` among a container cgroup's files (cgroup v2).

        The question to ask before setting ``unified[name]``: a missing file stops the
        container, so "not known" (files not probed) answers False, like cgroup v1.
        """
        return self.unified_allowed and self.cgroup_files is not None and name in self.cgroup_files

    def lacks_cgroup_file(self, name: str) -> bool:
        """True when ``unified[name]`` is known to fail: cgroup v1, or a probed cgroup v2 node
        whose containers have no such file. False when it cannot be told (nothing probed)."""
        if not self.unified_allowed:
            return True
        return self.cgroup_files is not None and name not in self.cgroup_files

    def to_json(self) -> dict[str, Any]:
        files = None if self.cgroup_files is None else sorted(self.cgroup_files)
        return {
            "cgroup_version": self.cgroup_version,
            "unified_allowed": self.unified_allowed,
            "cgroup_files": files,
        }


UNKNOWN_NODE = NodeFacts()
