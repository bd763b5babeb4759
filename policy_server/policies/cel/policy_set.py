"""The set of NodePolicies in force, and its hot reload that never lets a bad version in.

Owns reading the ``--policy cel=PATH`` source (``node_policy_doc``) and compiling every policy in it
(``compiler``) as one set: all compile, or none is taken. ``PolicySet.poll()`` looks at the
files' (and ``paramsFile``s') modification times and sizes; on a change it loads the whole set
again and replaces the one in force only if every policy compiles, else it keeps the last good
set and remembers the error (``/v1/policies/cel/state``, ``/healthz``). With each set it
builds, per event, the policies that handle it, their ``RequestView`` and their programs joined
into one (``by_event``), so a request pays one dictionary lookup for them. Without a path
(the policy on its defaults) the set is empty: every event is answered with no change. Must
not evaluate.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from policy_server import ConfigStatus, EventName, PolicyLoadError, ReloadResult
from policy_server.policies.cel.compiler import CompiledPolicy, compile_policy, joined_program
from policy_server.policies.cel.node_policy_doc import read_documents
from policy_server.policies.cel.request_view import RequestView
from policy_server.policies.cel.tally import Tally

log = logging.getLogger(__name__)
Stamp = tuple[tuple[str, int, int], ...]


@dataclass(frozen=True, slots=True)
class Loaded:
    policies: tuple[CompiledPolicy, ...]
    stamp: Stamp


def _stamp(path: Path, extra: tuple[Path, ...] = ()) -> Stamp:
    files = sorted(path.iterdir()) if path.is_dir() else [path]
    out = []
    for file in (*files, *extra):
        try:
            st = file.stat()
        except OSError:
            out.append((str(file), -1, -1))
            continue
        out.append((str(file), st.st_mtime_ns, st.st_size))
    return tuple(out)


def load(path: Path) -> Loaded:
    """Every policy under ``path``, compiled; raises ``PolicyLoadError``."""
    policies = tuple(compile_policy(source) for source in read_documents(path))
    params = tuple(p.params_file for p in policies if p.params_file is not None)
    return Loaded(policies, _stamp(path, params))


class InForce(NamedTuple):
    """The policies that handle one event, how to decode its bodies (what they all read), and
    their programs joined into one (None with fewer than two); ``plains``: per policy, its
    ``plain`` if its program is in the joined one, else None."""

    policies: tuple[CompiledPolicy, ...]
    view: RequestView
    program: Any
    plains: tuple[tuple[bool, ...] | None, ...]


def by_event(policies: tuple[CompiledPolicy, ...]) -> dict[EventName, InForce]:
    """Per event some policy handles, built once per set so that a request only looks it up."""
    out = {}
    for event in EventName:
        handling = tuple(p for p in policies if event in p.events)
        if handling:
            reads = [p.reads for p in handling]
            paths = None if None in reads else frozenset().union(
                *(r for r in reads if r is not None))
            program = joined_program(handling)
            plains = tuple(p.plain if program is not None and p.program_source is not None
                           else None for p in handling)
            out[event] = InForce(handling, RequestView(paths), program, plains)
    return out


class PolicySet:
    """The policies in force (``current``; ``by_event``: per event, those that handle it and
    how to decode its bodies for them), their generation and the last reload error."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        loaded = load(path) if path is not None else Loaded((), ())
        self.current = loaded.policies
        self._stamp = loaded.stamp
        self.generation = 1
        self.last_error: str | None = None
        self.by_event = by_event(self.current)
        self.tally = Tally()

    def _params_files(self) -> tuple[Path, ...]:
        return tuple(p.params_file for p in self.current if p.params_file is not None)

    def poll(self) -> ReloadResult:
        if self.path is None:
            return ReloadResult.UNCHANGED
        stamp = _stamp(self.path, self._params_files())
        if stamp == self._stamp:
            return ReloadResult.UNCHANGED
        self._stamp = stamp
        try:
            loaded = load(self.path)
        except PolicyLoadError as exc:
            self.last_error = str(exc)
            log.error("cel: %s: refused, the last good policies stay in force: %s",
                      self.path, exc)
            return ReloadResult.INVALID
        self.current = loaded.policies
        self.by_event = by_event(self.current)
        self._stamp = loaded.stamp
        self.generation += 1
        self.last_error = None
        log.info("cel: %s: generation %d in force (%s)", self.path, self.generation,
                 ", ".join(p.name for p in self.current))
        return ReloadResult.APPLIED

    def status(self) -> ConfigStatus:
        file = str(self.path) if self.path is not None else None
        return ConfigStatus(file, self.generation, self.last_error)
