"""An in-place resize as kubelet sends it: `NAME=cpu:500m,memory:256Mi` -> kubelet's CRI steps.

kubelet resizes a running container with CRI UpdateContainerResources, its CPU shares from the
new request, the quota from the new limit and the memory limit (bridge.kube.resources); the
runtime turns each CRI request into an UpdateContainer event's `linux_resources`
(bridge.contract.cri_service.to_nri, containerd's fromCRILinuxResources). `try --resize` and
the suite's `resize:` step give the new values as one quantity per resource, used as both the
request and the limit (as `kubectl patch --subresource resize` of a Guaranteed pod does).

kubelet does not send one update with both resources (pkg/kubelet/kuberuntime/
kuberuntime_manager.go: doPodResizeAction, updatePodContainerResources,
computePodResizeAction). It resizes memory first, then CPU, each a CRI call of its own per
container: the memory call carries the new memory limit with the CPU values kubelet last
actuated (the old ones), the CPU call the new CPU values with the memory it has just set. Within
a resource, containers that shrink go before containers that grow. The pod cgroup, which kubelet
writes itself (no CRI call, so no NRI event), is raised before the containers when the pod's
sum grows (the limit before the request) and lowered after them when it shrinks (the request
before the limit); memory has only a limit there. A resource that does not change gets no call.
`plan` is that order; the steps' values are kubelet's own view (what it asked for), not what
the runtime recorded after a plugin's adjustment.

Owns: parsing the option and planning kubelet's steps. Must not: run anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction

from bridge.contract import quantity
from bridge.contract.cri_service import to_nri
from bridge.kube.resources import cpu_memory
from bridge.proto.cri import runtime_pb2 as cri
from bridge.proto.nri import api_pb2 as api

RESOURCES = ("cpu", "memory")
MEMORY, CPU = "memory", "cpu"
POD = ""  # a step's container name for the pod cgroup (kubelet's own write)
LIMIT, REQUEST = "limit", "request"


@dataclass(frozen=True, slots=True)
class KubeletView:
    """A container's resources as kubelet last actuated them (its CRI request's values;
    0: not set)."""

    cpu_shares: int = 0
    cpu_quota: int = 0
    cpu_period: int = 0
    memory_limit: int = 0

    @classmethod
    def of(cls, resources: api.LinuxResources) -> KubeletView:
        """From the resources kubelet created the container with (before any plugin)."""
        return cls(resources.cpu.shares.value, resources.cpu.quota.value,
                   resources.cpu.period.value, resources.memory.limit.value)

    def linux_resources(self) -> api.LinuxResources:
        """The UpdateContainer event's `linux_resources` for a CRI request of these values."""
        return to_nri(cri.LinuxContainerResources(
            cpu_shares=self.cpu_shares, cpu_quota=self.cpu_quota, cpu_period=self.cpu_period,
            memory_limit_in_bytes=self.memory_limit))


@dataclass(frozen=True, slots=True)
class ResizeStep:
    """One step of kubelet's resize: a container's CRI UpdateContainerResources (`container`
    named, `request` its values) or the pod cgroup's `limit` or `request` (`container` POD)."""

    resource: str  # MEMORY or CPU
    container: str
    request: KubeletView | None = None  # for a container: what kubelet sends
    pod_value: str = ""  # for the pod cgroup: LIMIT or REQUEST

    def describe(self) -> str:
        if self.container == POD:
            return f"pod cgroup {self.resource} {self.pod_value}"
        return f"{self.container} {self.resource}"


@dataclass(frozen=True, slots=True)
class Resize:
    """A resize of the container named `container` (in every pod that has one)."""

    container: str
    values: tuple[tuple[str, Fraction], ...]  # (resource, quantity), sorted

    def desired(self, current: KubeletView) -> KubeletView:
        """`current` with this resize's resources; those it leaves out stay as they are."""
        values = dict(self.values)
        wanted = cpu_memory(self.values, self.values)
        out = current
        if CPU in values:
            out = replace(out, cpu_shares=wanted.cpu_shares, cpu_quota=wanted.cpu_quota,
                          cpu_period=wanted.cpu_period)
        if MEMORY in values:
            out = replace(out, memory_limit=wanted.memory_limit)
        return out


def resize_steps(current: Mapping[str, KubeletView], resizes: Sequence[Resize]) -> list[ResizeStep]:
    """kubelet's steps resizing one pod whose running containers kubelet last actuated as
    `current` (name -> values, in the pod's order); `resizes` naming other containers are
    not this pod's. A later resize of the same container wins (one pod spec)."""
    desired = dict(current)
    for resize in resizes:
        if resize.container in desired:
            desired[resize.container] = resize.desired(desired[resize.container])
    steps: list[ResizeStep] = []
    now = dict(current)
    for resource in (MEMORY, CPU):
        shrink: list[str] = []
        grow: list[str] = []
        for name in current:
            old, new = _key(now[name], resource), _key(desired[name], resource)
            if old == new:
                continue
            # The limit decides the order where it changes, else the request (CPU shares).
            if new[0] != old[0]:
                (grow if new[0] > old[0] else shrink).append(name)
            else:
                (grow if new[1] > old[1] else shrink).append(name)
        if not shrink and not grow:
            continue
        before = _pod_sums(now, resource)
        after_values = dict(now)
        for name in shrink + grow:
            after_values[name] = _with(now[name], desired[name], resource)
        after = _pod_sums(after_values, resource)
        if after[0] is not None and before[0] is not None and after[0] > before[0]:
            steps.append(ResizeStep(resource, POD, pod_value=LIMIT))
        if after[1] > before[1]:
            steps.append(ResizeStep(resource, POD, pod_value=REQUEST))
        # kubelet prepends each shrinking container: the last one found goes first.
        for name in list(reversed(shrink)) + grow:
            now[name] = after_values[name]
            steps.append(ResizeStep(resource, name, now[name]))
        if after[1] < before[1]:
            steps.append(ResizeStep(resource, POD, pod_value=REQUEST))
        if after[0] is not None and before[0] is not None and after[0] < before[0]:
            steps.append(ResizeStep(resource, POD, pod_value=LIMIT))
    return steps


def _key(view: KubeletView, resource: str) -> tuple[int, int]:
    """(limit, request) of one resource; memory has no request in a cgroup."""
    if resource == MEMORY:
        return view.memory_limit, 0
    return view.cpu_quota, view.cpu_shares


def _with(old: KubeletView, new: KubeletView, resource: str) -> KubeletView:
    """`old` with `new`'s values of `resource` only: the other resource stays as last set."""
    if resource == MEMORY:
        return replace(old, memory_limit=new.memory_limit)
    return replace(old, cpu_shares=new.cpu_shares, cpu_quota=new.cpu_quota,
                   cpu_period=new.cpu_period)


def _pod_sums(views: Mapping[str, KubeletView], resource: str) -> tuple[int | None, int]:
    """The pod cgroup's (limit, request) of `resource`: the containers' sums; no limit when a
    container has none (kubelet leaves the pod's limit as it is then)."""
    keys = [_key(v, resource) for v in views.values()]
    limit = None if any(k[0] <= 0 for k in keys) else sum(k[0] for k in keys)
    return limit, sum(k[1] for k in keys)


def parse_resize(text: str) -> Resize:
    """`NAME=cpu:500m,memory:256Mi` (either resource may be left out); ValueError if not."""
    name, sep, spec = text.partition("=")
    if not sep or not name or not spec:
        raise ValueError(f"expected CONTAINER=cpu:Q,memory:Q, got {text!r}")
    values: dict[str, Fraction] = {}
    for item in spec.split(","):
        resource, sep, amount = item.strip().partition(":")
        if resource not in RESOURCES or not sep:
            raise ValueError(f"expected cpu:Q or memory:Q, got {item!r} in {text!r}")
        try:
            values[resource] = quantity.parse_quantity(amount)
        except quantity.QuantityError as exc:
            raise ValueError(f"{resource}: {exc}") from None
        if values[resource] <= 0:
            raise ValueError(f"{resource}: must be positive, got {amount!r}")
    return Resize(name, tuple(sorted(values.items())))
