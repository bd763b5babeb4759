"""Typed, immutable views of the webhook request envelope (what a policy handler receives).

Owns the SDK's ``Event`` and the objects it carries, as frozen dataclasses. The fields policies
commonly read are typed; every other field of the request (a container's hooks, namespaces,
seccomp profile, devices, ...) is in ``Event.json()``, the request body as the server received
it (tests/policy_server/sdk/test_contract_reach.py lists them, and fails on a contract field
that is neither typed nor listed). A request body becomes an ``Event`` in one
place, the engine's request path (``policy_server.engine.request``), which refuses a malformed
body with an error naming the field. Must not import web frameworks or do I/O; it parses JSON
only when a policy asks for ``Event.json()``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import orjson

from bridge.contract.catalogue import API_VERSION, EventName
from policy_server.sdk.decision import Adjustment, ContainerUpdate
from policy_server.sdk.oci import Mount, Rlimit, no_strings
from policy_server.sdk.validation import NO_OWNERS, Owners, Plugin

_NO_PAGES: Mapping[str, int] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class CPU:
    """``LinuxCPU``: every field optional, as in NRI."""

    shares: int | None = None
    quota: int | None = None
    period: int | None = None
    cpus: str | None = None
    mems: str | None = None
    realtime_runtime: int | None = None
    realtime_period: int | None = None


@dataclass(frozen=True, slots=True)
class Memory:
    """``LinuxMemory``: the limits in bytes, every field optional."""

    limit: int | None = None
    reservation: int | None = None
    swap: int | None = None
    swappiness: int | None = None


@dataclass(frozen=True, slots=True)
class Resources:
    """``LinuxResources`` as a container currently has it, or as an update requests it
    (``event.container.resources.memory.limit``; device cgroup rules are in ``Event.json()``)."""

    cpu: CPU = CPU()
    memory: Memory = Memory()
    unified: Mapping[str, str] = field(default_factory=no_strings)
    rdt_class: str | None = None
    blockio_class: str | None = None
    pids_limit: int | None = None
    # page size ("2MB") -> limit in bytes
    hugepage_limits: Mapping[str, int] = field(default_factory=lambda: _NO_PAGES)


@dataclass(frozen=True, slots=True)
class User:
    """``User``: the ids the container's process runs as."""

    uid: int = 0
    gid: int = 0
    additional_gids: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Image:
    """``Image``: the container's image as the runtime resolved it."""

    name: str = ""
    digest: str = ""
    config_digest: str = ""


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
    user: User | None = None
    image: Image | None = None
    # Set once the container has stopped (StopContainer, RemoveContainer).
    exit_code: int | None = None
    status_reason: str = ""
    status_message: str = ""
    cdi_devices: tuple[str, ...] = ()
    sysctl: Mapping[str, str] = field(default_factory=no_strings)
    rlimits: tuple[Rlimit, ...] = ()

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
    # ValidateContainerAdjustment: what every plugin asked for, merged (``container`` is the
    # container before it), who set each field, and the plugins connected to the runtime.
    adjust: Adjustment | None = None
    update: tuple[ContainerUpdate, ...] = ()
    owners: Owners = NO_OWNERS
    plugins: tuple[Plugin, ...] = ()
    # The request body as received (b"" for an Event built by hand): ``json()``.
    body: bytes = field(default=b"", repr=False)

    def json(self) -> dict[str, Any]:
        """The whole request as JSON (webhook contract field names, docs/webhooks.md): the
        escape hatch to any field the typed view leaves out. Parsed on each call; ``{}`` for an
        ``Event`` built by hand."""
        return orjson.loads(self.body) if self.body else {}
