"""Typed, immutable views of the webhook request envelope (what a policy handler receives).

Owns the SDK's ``Event`` and the objects it carries, as frozen dataclasses. Fields a policy is
unlikely to need (hooks, rlimits, seccomp, ...) are not modelled. A request body becomes an
``Event`` in one place, the engine's request path (``policy_server.engine.request``), which
refuses a malformed body with an error naming the field. Must not import web frameworks, parse
JSON or do I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import NamedTuple

from bridge.contract.catalogue import API_VERSION, EventName

_EMPTY: Mapping[str, str] = MappingProxyType({})


def no_strings() -> Mapping[str, str]:
    """The shared empty string map (a default that costs no allocation)."""
    return _EMPTY


@dataclass(frozen=True, slots=True)
class CPU:
    """``LinuxCPU``: every field optional, as in NRI."""

    shares: int | None = None
    quota: int | None = None
    period: int | None = None
    cpus: str | None = None
    mems: str | None = None


@dataclass(frozen=True, slots=True)
class Memory:
    """``LinuxMemory`` (only the limit is modelled)."""

    limit: int | None = None


@dataclass(frozen=True, slots=True)
class Resources:
    """``LinuxResources`` as a container currently has it, or as an update requests it."""

    cpu: CPU = CPU()
    memory: Memory = Memory()
    unified: Mapping[str, str] = field(default_factory=no_strings)
    rdt_class: str | None = None


class Mount(NamedTuple):
    """An OCI mount (a named tuple: containers carry a dozen, built on every request)."""

    destination: str
    type: str = ""
    source: str = ""
    options: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Pod:
    """``PodSandbox`` with ``linux.cgroup_parent`` / ``linux.cgroups_path`` flattened."""

    id: str
    name: str = ""
    uid: str = ""
    namespace: str = ""
    labels: Mapping[str, str] = field(default_factory=no_strings)
    annotations: Mapping[str, str] = field(default_factory=no_strings)
    runtime_handler: str = ""
    cgroup_parent: str = ""
    cgroups_path: str = ""
    ips: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Container:
    """``Container`` with ``linux.resources`` / ``linux.oom_score_adj`` flattened."""

    id: str
    pod_sandbox_id: str = ""
    name: str = ""
    state: str = ""
    labels: Mapping[str, str] = field(default_factory=no_strings)
    annotations: Mapping[str, str] = field(default_factory=no_strings)
    args: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    mounts: tuple[Mount, ...] = ()
    resources: Resources | None = None
    oom_score_adj: int | None = None
    pid: int = 0

    def env_map(self) -> dict[str, str]:
        """``KEY=VALUE`` entries as a dict (a later duplicate wins, as in execve)."""
        out: dict[str, str] = {}
        for entry in self.env:
            key, _, value = entry.partition("=")
            out[key] = value
        return out


@dataclass(frozen=True, slots=True)
class Event:
    """One webhook request: the envelope plus the payload objects of its event."""

    name: EventName
    uid: str = ""
    api_version: str = API_VERSION
    runtime_name: str = ""
    runtime_version: str = ""
    # The runtime's NRI version ("v0.11.0", "" if unknown) and the adjustment fields it
    # applies (None if unknown); a field not listed is dropped, silently by the runtime or, if it
    # would crash the runtime (linux.sysctl on NRI v0.11), by the bridge.
    runtime_nri_version: str = ""
    runtime_capabilities: frozenset[str] | None = None
    budget_ms: int | None = None
    dry_run: bool = False
    pod: Pod | None = None
    container: Container | None = None
    linux_resources: Resources | None = None
    pods: tuple[Pod, ...] = ()
    containers: tuple[Container, ...] = ()
