"""Extension points beyond handlers: what a policy may have besides event -> decision.

Owns the values and callable shapes of the extension points a ``Policy`` registers with a
decorator (``Policy.background``, ``Policy.describe``, ``Policy.reconcile``,
``Policy.node_needs``, ``Policy.counters``), plus the configuration status a background task
reports:

- a background task, ``async def task(host: PolicyHost)``, runs as long as the server does
  (koordinator-qos polls its rules file in one). ``PolicyHost`` is what the server offers it:
  the poll interval, a bounded wait for the stop, and ``config_polled`` to report a reload
  (metrics; an applied change recomputes every known container, as after a restart);
- a state description, ``def describe() -> Mapping``, served as
  ``GET /v1/policies/{name}/state``;
- a reconcile hook, ``def plan(event) -> NodePlan``: the policy is then re-evaluated by the
  node reconciler (a Synchronize of every known container with their cgroup files read back,
  its decision's effects re-applied with drift counted) and the plan is carried out on every
  pass (``sdk.node_plan``);
- node needs, ``def needs() -> NodeNeeds``: which node features the configuration in force
  asks for, so the start-up probe warns about those that cannot work here;
- counters, ``def counters() -> Iterable[CounterSample]``: the policy's own monotonic counts,
  read at each scrape and exported as ``policy_<policy>_<name>_total`` (the server's
  ``telemetry``). Label values must come from a bounded set (names in the policy's
  configuration, never from requests).

Must not: do I/O or import the server (the framework implements ``PolicyHost``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from policy_server.sdk.model import Event
from policy_server.sdk.node_plan import NodeNeeds, NodePlan


class ReloadResult(StrEnum):
    """What one look at a policy's configuration source found."""

    UNCHANGED = "unchanged"  # source untouched, or the same configuration
    APPLIED = "applied"
    INVALID = "invalid"  # the previous configuration stays in force


@dataclass(frozen=True, slots=True)
class ConfigStatus:
    """Where a policy's configuration comes from and how its last load went (``/healthz``)."""

    file: str | None = None
    generation: int = 0
    last_error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "generation": self.generation, "last_error": self.last_error}


@dataclass(frozen=True, slots=True)
class CounterSample:
    """One value of one of a policy's own counters (``Policy.counters``)."""

    name: str  # exported as policy_<policy>_<name>_total
    documentation: str
    labels: tuple[tuple[str, str], ...]  # (label, value), the same label names per name
    value: float


class PolicyHost(Protocol):
    """What the server offers one policy's background task."""

    @property
    def poll_interval_s(self) -> float:
        """How often to look at a configuration source (``--rules-poll-interval``)."""
        ...

    async def stopped(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the server to stop; True once it is stopping."""
        ...

    async def config_polled(self, result: ReloadResult, status: ConfigStatus) -> None:
        """Report one look at the configuration: counted in the metrics; ``APPLIED`` makes
        the server recompute every known container (pushing what changed) before returning."""
        ...


BackgroundTask = Callable[[PolicyHost], Awaitable[None]]
StateDescription = Callable[[], Mapping[str, Any]]
ReconcileHook = Callable[[Event], NodePlan]
NeedsHook = Callable[[], NodeNeeds]
ConfigHook = Callable[[], ConfigStatus]
CountersHook = Callable[[], Iterable[CounterSample]]


@dataclass(frozen=True, slots=True)
class Extensions:
    """One policy's registered extension points (None: not registered)."""

    background: BackgroundTask | None = None
    describe: StateDescription | None = None
    config: ConfigHook | None = None
    reconcile: ReconcileHook | None = None
    needs: NeedsHook | None = None
    counters: CountersHook | None = None


NO_EXTENSIONS = Extensions()
