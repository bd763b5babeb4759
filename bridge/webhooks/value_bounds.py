"""Values bounded by what the node and the container's QoS class allow.

Three values can make a container stronger than kubelet made it, however well-formed:
- `linux.oom_score_adj` below the floor of the container's kubelet QoS class: kubelet gives
  Guaranteed (and node-critical) containers -997, Burstable ones 3..999 and BestEffort ones 1000
  (pkg/kubelet/qos/policy.go); -998..-1000 are the node's own daemons' and "never kill". A value
  at or above the container's current one is always fine (it makes the container weaker);
- `linux.resources.pids.limit` of -1 (or any value below 1: "no limit" to runc and crun) when
  the container has a limit, or when the bridge does not know the container's;
- a `hugepage_limits` entry above the node's hugepages of that size (the node's
  `/sys/kernel/mm/hugepages`, read by bridge.webhooks.node_hugepages) and above the
  container's own limit of that size.

Each bound is lifted for one webhook by `limits:oom_score_adj`, `limits:pids` or
`limits:hugepages` in its `allow` list (docs/configuration.md#items-refused-by-default).

Owns the bounds and the QoS floor. Must not do I/O: the node's hugepages come in as a callable.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from bridge.proto.nri import api_pb2 as api

GUARANTEED_FLOOR = -997  # kubelet's guaranteedOOMScoreAdj
BURSTABLE_FLOOR = 3  # 1000 + guaranteedOOMScoreAdj: the lowest a Burstable container gets
BESTEFFORT_FLOOR = 1000  # kubelet's besteffortOOMScoreAdj
LIMIT_NAMES = ("oom_score_adj", "pids", "hugepages")  # the names of `limits:<name>`


@dataclass(frozen=True, slots=True)
class ReplyTarget:
    """The container a part of a reply changes, and its pod, as the bridge knows them."""

    container: api.Container | None = None
    pod: api.PodSandbox | None = None


class OutOfBounds(Exception):
    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


def qos_floor(target: ReplyTarget) -> int:
    """The lowest oom_score_adj the container's QoS class gets from kubelet: read from the
    value kubelet gave the container, else from the pod's cgroup parent, else Guaranteed's."""
    container = target.container
    if container is not None and container.linux.HasField("oom_score_adj"):
        current = container.linux.oom_score_adj.value
        if current >= BESTEFFORT_FLOOR:
            return BESTEFFORT_FLOOR
        if current >= BURSTABLE_FLOOR:
            return BURSTABLE_FLOOR
        return GUARANTEED_FLOOR
    parent = target.pod.linux.cgroup_parent if target.pod is not None else ""
    if "besteffort" in parent:
        return BESTEFFORT_FLOOR
    if "burstable" in parent:
        return BURSTABLE_FLOOR
    return GUARANTEED_FLOOR


def check_oom_score_adj(value: int, target: ReplyTarget, allow: Collection[str], path: str) -> None:
    if "limits:oom_score_adj" in allow:
        return
    container = target.container
    if (container is not None and container.linux.HasField("oom_score_adj")
            and value >= container.linux.oom_score_adj.value):
        return
    floor = qos_floor(target)
    if value < floor:
        raise OutOfBounds(path, f"{value} is below {floor}, the floor of the container's QoS "
                          "class (allow it by name: limits:oom_score_adj)")


def check_pids(limit: int, target: ReplyTarget, allow: Collection[str], path: str) -> None:
    if limit >= 1 or "limits:pids" in allow:
        return
    container = target.container
    if container is None:
        had = "the container's pids limit is not known"
    elif container.linux.resources.HasField("pids") and container.linux.resources.pids.limit >= 1:
        had = f"the container has a pids limit of {container.linux.resources.pids.limit}"
    else:
        return  # the container has no limit: "no limit" removes nothing
    raise OutOfBounds(path, f"{limit} removes the pids limit ({had}; allow it by name: "
                      "limits:pids)")


def check_hugepages(limits: Collection[api.HugepageLimit], target: ReplyTarget,
                    allow: Collection[str], node: Callable[[], Mapping[str, int]],
                    path: str) -> None:
    if "limits:hugepages" in allow:
        return
    own: dict[str, int] = {}
    if target.container is not None:
        own = {h.page_size: h.limit for h in target.container.linux.resources.hugepage_limits}
    available: Mapping[str, int] | None = None
    for i, limit in enumerate(limits):
        if limit.limit <= own.get(limit.page_size, 0):
            continue
        if available is None:
            available = node()  # read only when a limit is above the container's own
        total = available.get(limit.page_size, 0)
        if limit.limit > total:
            raise OutOfBounds(f"{path}[{i}].limit", f"{limit.limit} bytes of {limit.page_size} "
                              f"hugepages is more than the node has ({total}) and than the "
                              "container's own limit (allow it by name: limits:hugepages)")
