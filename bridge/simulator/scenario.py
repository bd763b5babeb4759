"""Scenarios: scripted lifecycle events for the simulator, loaded from JSON.

Three input shapes are accepted:
- an event log (`*-events.jsonl`, the format of the recorded fixtures): one
  line per event, `{"event": "CreateContainer", "pod": {...}, "container": {...},
  "linux_resources": {...}}`, fields in canonical protobuf JSON with proto
  field names;
- a wire log (`*-wire.jsonl`, `*-wire-legacy-plugin.jsonl`): one line per
  RPC the recording plugin received; StateChange lines become their event,
  Configure/Synchronize/ValidateContainerAdjustment are skipped, fields the
  recording plugin did not know are restored (recording.py);
- a scenario (`*.json`): `{"profile": "...", "description": "...",
  "sync": {"pods": [...], "containers": [...]}, "steps": [<event line>,
  {"sleep_ms": N}, ...]}`; `sync` is the state the runtime has before the
  plugin connects.

`load_scenario` also takes the name of a bundled scenario (see
`bridge/simulator/scenarios/`). Protobuf JSON is parsed strictly, so a typo in
a field name is an error, not a silently dropped field.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf.json_format import ParseDict, ParseError
from google.protobuf.message import Message

from bridge.contract.catalogue import EVENTS_BY_RPC, REQUEST_TYPES, NriEvent
from bridge.proto.nri import api_pb2 as api
from bridge.runtime_facts.profiles import PROFILES
from bridge.simulator.delivery import EventResult
from bridge.simulator.recording import RecordingError, parse_line
from bridge.simulator.runtime import SimulatedRuntime

SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"
# Validation is not a step of its own: the runtime runs it inside CreateContainer.
_SKIPPED_RPCS = frozenset({"Configure", "Synchronize", "Shutdown", "ValidateContainerAdjustment"})


class ScenarioError(Exception):
    """A scenario file that cannot be used; names the file and line/step."""


@dataclass(frozen=True, slots=True)
class EventStep:
    event: NriEvent
    request: Message  # one of bridge.contract.catalogue.REQUEST_TYPES; copied before each run

    @property
    def pod(self) -> api.PodSandbox:
        pod: api.PodSandbox = getattr(self.request, "pod")  # noqa: B009 - every request has one
        return pod


@dataclass(frozen=True, slots=True)
class SleepStep:
    ms: float


Step = EventStep | SleepStep


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    steps: tuple[Step, ...]
    profile: str | None = None
    description: str = ""
    sync_pods: tuple[api.PodSandbox, ...] = ()
    sync_containers: tuple[api.Container, ...] = ()

    @property
    def events(self) -> tuple[EventStep, ...]:
        return tuple(s for s in self.steps if isinstance(s, EventStep))

    def seed(self, runtime: SimulatedRuntime) -> None:
        """Give the runtime the scenario's pre-existing state (before plugins connect)."""
        runtime.state.seed(self.sync_pods, self.sync_containers)


def bundled_scenarios() -> list[str]:
    return sorted(p.name for p in SCENARIO_DIR.iterdir()
                  if p.suffix in (".json", ".jsonl") and p.is_file())


def resolve(name: str | Path) -> Path:
    """A path as given if it exists, else a bundled scenario by file name or stem."""
    path = Path(name)
    if path.is_file():
        return path
    for candidate in (SCENARIO_DIR / path.name, SCENARIO_DIR / f"{path.name}.json",
                      SCENARIO_DIR / f"{path.name}.jsonl"):
        if candidate.is_file():
            return candidate
    raise ScenarioError(f"no scenario {str(name)!r}; bundled: {', '.join(bundled_scenarios())}")


def profile_named_by(stem: str, keys: Iterable[str] = PROFILES) -> str | None:
    """The profile a recorded log is named after: the longest key its name starts with
    (containerd-2.4.0-beta.0-wire is the beta's, not containerd-2.4.0's), or None."""
    named = [key for key in keys if stem.startswith(key)]
    return max(named, key=len) if named else None


def load_scenario(source: str | Path) -> Scenario:
    """Load a `.jsonl` event or wire log, or a `.json` scenario."""
    path = resolve(source)
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
        steps = []
        for number, line in lines:
            step = _step(_json(line, f"{path}:{number}"), f"{path}:{number}")
            if step is not None:
                steps.append(step)
        return Scenario(name=path.stem, steps=tuple(steps), profile=profile_named_by(path.stem))
    doc = _json(text, str(path))
    if not isinstance(doc, dict):
        raise ScenarioError(f"{path}: a scenario is a JSON object")
    return parse_scenario(doc, name=path.stem, where=str(path))


def parse_scenario(doc: Mapping[str, Any], *, name: str = "scenario",
                   where: str = "scenario") -> Scenario:
    """Build a Scenario from an already decoded `.json` document."""
    unknown = set(doc) - {"profile", "description", "sync", "steps"}
    if unknown:
        raise ScenarioError(f"{where}: unknown keys {sorted(unknown)}")
    sync = doc.get("sync") or {}
    pods = tuple(_parse(p, api.PodSandbox(), f"{where}: sync.pods[{i}]")
                 for i, p in enumerate(sync.get("pods", ())))
    containers = tuple(_parse(c, api.Container(), f"{where}: sync.containers[{i}]")
                       for i, c in enumerate(sync.get("containers", ())))
    steps: list[Step] = []
    for i, raw in enumerate(doc.get("steps", ())):
        step = _step(raw, f"{where}: steps[{i}]")
        if step is not None:
            steps.append(step)
    profile = doc.get("profile")
    return Scenario(name=name, steps=tuple(steps), profile=profile if profile else None,
                    description=str(doc.get("description", "")),
                    sync_pods=pods, sync_containers=containers)


async def run_scenario(runtime: SimulatedRuntime, scenario: Scenario | Iterable[Step],
                       ) -> list[EventResult]:
    """Run every step in order; returns one EventResult per event step."""
    steps = scenario.steps if isinstance(scenario, Scenario) else tuple(scenario)
    results: list[EventResult] = []
    for step in steps:
        if isinstance(step, SleepStep):
            await asyncio.sleep(step.ms / 1000.0)
            continue
        request = type(step.request)()
        request.CopyFrom(step.request)  # the run mutates its request (merge view)
        results.append(await runtime.run_request(step.event, request))
    return results


# -- parsing helpers ---------------------------------------------------------------------

def _json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ScenarioError(f"{where}: invalid JSON: {exc}") from None


def _parse(data: Any, message: Message, where: str) -> Any:
    try:
        return ParseDict(data, message)
    except ParseError as exc:
        raise ScenarioError(f"{where}: {exc}") from None


def _step(raw: Any, where: str) -> Step | None:
    if not isinstance(raw, dict):
        raise ScenarioError(f"{where}: a step is a JSON object")
    if "sleep_ms" in raw:
        ms = raw["sleep_ms"]
        if not isinstance(ms, int | float) or ms < 0 or len(raw) != 1:
            raise ScenarioError(f"{where}: sleep step must be {{\"sleep_ms\": N}} with N >= 0")
        return SleepStep(float(ms))
    if "rpc" in raw:
        return _wire_step(raw, where)
    name = raw.get("event")
    if not isinstance(name, str) or name not in EVENTS_BY_RPC:
        raise ScenarioError(f"{where}: unknown event {name!r}")
    event = EVENTS_BY_RPC[name]
    fields = {k: v for k, v in raw.items() if k != "event"}
    return EventStep(event, _parse(fields, REQUEST_TYPES[event](), where))


def _wire_step(raw: Mapping[str, Any], where: str) -> EventStep | None:
    if raw.get("rpc") in _SKIPPED_RPCS:
        return None
    try:
        line = parse_line(raw, where)  # restores fields an older recording plugin did not know
    except RecordingError as exc:
        raise ScenarioError(str(exc)) from None
    if line.event is None:
        raise ScenarioError(f"{where}: StateChange with unknown event")
    if line.rpc != "StateChange":
        return EventStep(line.event, line.request)
    change = line.request
    assert isinstance(change, api.StateChangeEvent)
    message = REQUEST_TYPES[line.event]()
    getattr(message, "pod").CopyFrom(change.pod)  # noqa: B009 - every event request has one
    if change.HasField("container") and "container" in message.DESCRIPTOR.fields_by_name:
        getattr(message, "container").CopyFrom(change.container)  # noqa: B009
    return EventStep(line.event, message)
