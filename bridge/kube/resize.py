"""An in-place resize as kubelet sends it: `NAME=cpu:500m,memory:256Mi` -> the NRI resources.

kubelet resizes a running container with CRI UpdateContainerResources, its CPU shares from the
new request, the quota from the new limit and the memory limit (bridge.kube.resources); the
runtime turns the CRI request into the UpdateContainer event's `linux_resources`
(bridge.contract.cri_service.to_nri, containerd's fromCRILinuxResources). `try --resize` and
the suite's `resize:` step give the new values as one quantity per resource, used as both the
request and the limit (as `kubectl patch --subresource resize` of a Guaranteed pod does).

Owns: parsing the option and building the resources. Must not: run anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from bridge.contract import quantity
from bridge.contract.cri_service import to_nri
from bridge.kube.resources import cpu_memory
from bridge.proto.cri import runtime_pb2 as cri
from bridge.proto.nri import api_pb2 as api

RESOURCES = ("cpu", "memory")


@dataclass(frozen=True, slots=True)
class Resize:
    """A resize of the container named `container` (in every pod that has one)."""

    container: str
    values: tuple[tuple[str, Fraction], ...]  # (resource, quantity), sorted

    def linux_resources(self) -> api.LinuxResources:
        """The UpdateContainer event's `linux_resources` for this resize."""
        values = self.values
        wanted = cpu_memory(values, values)
        linux = cri.LinuxContainerResources(
            cpu_shares=wanted.cpu_shares, cpu_quota=wanted.cpu_quota,
            cpu_period=wanted.cpu_period, memory_limit_in_bytes=wanted.memory_limit)
        return to_nri(linux)


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
            values[resource] = quantity.parse(amount)
        except quantity.QuantityError as exc:
            raise ValueError(f"{resource}: {exc}") from None
        if values[resource] <= 0:
            raise ValueError(f"{resource}: must be positive, got {amount!r}")
    return Resize(name, tuple(sorted(values.items())))
