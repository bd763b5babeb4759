"""Example policy with a background task and a node effect: cap pods' memory per namespace.

The caps live in a small YAML file (``namespace: bytes``) that the policy's background task
polls. Every pod of a capped namespace gets its pod cgroup's ``memory.limit_in_bytes`` written
(a node effect: NRI cannot change a pod-level cgroup), when the pod starts and on every node
reconciler pass, so a value reset behind our back is put back and a changed cap reaches pods
that already run. ``GET /v1/policies/memory-cap/state`` shows the caps in force.
docs/policy-server.md#extending-a-policy walks through it;
tests/policy_server/test_extension_example.py runs it end to end.

    MEMORY_CAPS=/etc/nri-policy-server/memory-caps.yaml nri-policy-server --no-koordinator \
        --policy-module examples/memory_cap_policy.py \
        --bridge-control unix:///run/nri-webhook-bridge/control.sock
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from policy_server import (
    NO_PLAN,
    CgroupWrite,
    ConfigStatus,
    Decision,
    Event,
    EventName,
    NodePlan,
    Pod,
    Policy,
    PolicyHost,
    ReloadResult,
)

CAPS_FILE = Path(os.environ.get("MEMORY_CAPS", "/etc/nri-policy-server/memory-caps.yaml"))
Caps = Mapping[str, int]


class CapsFile:
    """namespace -> memory cap in bytes, from a YAML file; the last good version stays in force."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.caps: Caps = {}
        self.generation = 0
        self.last_error: str | None = None
        self._seen: tuple[int, int] | None = None  # (mtime ns, size) of the version read

    def poll(self) -> ReloadResult:
        """Read the file again if it changed (file I/O: run it in a thread)."""
        try:
            stat = self.path.stat()
            if (stat.st_mtime_ns, stat.st_size) == self._seen:
                return ReloadResult.UNCHANGED
            self._seen = (stat.st_mtime_ns, stat.st_size)
            caps = _parse(yaml.safe_load(self.path.read_text(encoding="utf-8")))
        except (OSError, yaml.YAMLError, ValueError) as exc:
            self.last_error = f"{self.path}: {exc}"
            return ReloadResult.INVALID
        self.last_error = None
        if caps == self.caps and self.generation:
            return ReloadResult.UNCHANGED
        self.caps, self.generation = caps, self.generation + 1
        return ReloadResult.APPLIED

    def status(self) -> ConfigStatus:
        return ConfigStatus(str(self.path), self.generation, self.last_error)


def _parse(doc: Any) -> dict[str, int]:
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise ValueError("expected a mapping of namespace: bytes")
    for namespace, cap in doc.items():
        if not isinstance(cap, int) or isinstance(cap, bool) or cap <= 0:
            raise ValueError(f"{namespace}: expected a positive number of bytes, got {cap!r}")
    return {str(k): v for k, v in doc.items()}


def _writes(pods: Iterable[Pod], caps: Caps) -> tuple[CgroupWrite, ...]:
    return tuple(
        CgroupWrite(pod.cgroup_parent, "memory.limit_in_bytes", caps[pod.namespace],
                    f"{pod.namespace}/{pod.name}")
        for pod in pods
        if pod.namespace in caps and pod.cgroup_parent
    )  # fmt: skip


def build(path: Path) -> Policy[Caps]:
    """The policy, its caps read from ``path`` now and polled while the server runs."""
    source = CapsFile(path)
    source.poll()
    # The context is the caps in force: handlers stay pure functions of (event, caps).
    policy = Policy("memory-cap", context=lambda: source.caps,
                    description="pod memory cap per namespace (a pod cgroup write)")  # fmt: skip

    @policy.on(EventName.RUN_POD_SANDBOX)
    def cap_new_pod(event: Event, caps: Caps) -> Decision | None:
        effects = _writes((event.pod,) if event.pod else (), caps)
        return Decision(effects=effects) if effects else None

    @policy.on(EventName.SYNCHRONIZE)
    def cap_every_pod(event: Event, caps: Caps) -> Decision:
        return Decision(effects=_writes(event.pods, caps))

    @policy.background
    async def watch_caps(host: PolicyHost) -> None:
        while not await host.stopped(host.poll_interval_s):
            result = await asyncio.to_thread(source.poll)
            # APPLIED: the server recomputes every known pod, so running pods get the new cap.
            await host.config_polled(result, source.status())

    @policy.describe
    def state() -> Mapping[str, Any]:
        return {**source.status().to_json(), "caps": dict(source.caps)}

    @policy.reconcile
    def keep(event: Event) -> NodePlan:
        # Registering the hook puts the policy under the node reconciler: its Synchronize
        # decision's effects are compared with the cgroup files and rewritten where they
        # drifted. Nothing to keep beyond them (no kube-QoS values, OOM scores, switches).
        return NO_PLAN

    return policy


policy = build(CAPS_FILE)
