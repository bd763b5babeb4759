"""Evaluating compiled ``NodePolicy``s on one request: the VAP/MAP order of work.

Owns ``evaluate(policy, event, request, tally)``, and ``evaluate_all``: every policy in force on an
event, their programs joined into one evaluation. The policy's one program (``policy_program``)
answers first (the common answer, every validation holding and nothing else to say, returns None at
once); where it cannot (an error, a value of an unexpected type), the exact path below runs,
expression by expression, and decides what the error means. The exact path: the request's JSON maps
(``request_view``) bound once (``pod``, ``container``, ..., ``params``, ``variables``);
``matchConditions`` (all true, or the policy does not apply; a false one wins over another's error,
as in the API server); ``variables`` computed lazily, at most once per request: none until an
expression reads one, then all of them together (``_Request._compute_variables`` says why);
``validations`` (a false one fails with its ``messageExpression``, else ``message``, else the
expression) acted on by ``validationActions`` (Deny: reject, Warn: a warning, Audit: a log line);
``auditAnnotations`` as warnings ``<policy>/<key>: value``; ``mutations`` applied in order to the
adjustment the policy builds (ApplyConfiguration: maps merged key by key, lists appended;
JSONPatch), which becomes the ``adjust`` of CreateContainer or the container's ``update`` on
UpdateContainer. An evaluation error follows ``failurePolicy``: Fail rejects, Ignore skips the
policy with a warning. ``tally`` counts outcomes per policy and validation. Must not do I/O besides
logging, nor know about files or reloads.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cel_expr_python import cel

from policy_server import Decision, EventName
from policy_server.policies.cel import json_patch, mutation_check, policy_program
from policy_server.policies.cel.compiler import CompiledPolicy, Program, eval_env
from policy_server.policies.cel.node_policy_doc import PatchType, ValidationAction
from policy_server.policies.cel.policy_program import (
    ALL_HOLD,
    DOES_NOT_APPLY,
    NOT_RUN,
    Answer,
    ProgramResult,
)
from policy_server.policies.cel.policy_set import InForce
from policy_server.policies.cel.tally import Tally

log = logging.getLogger(__name__)
_ERROR = cel.Type.ERROR


class EvaluationError(Exception):
    """An expression failed at run time (no such key, a wrong type, the iteration budget)."""

    def __init__(self, program: Program, reason: str) -> None:
        super().__init__(f"{program.key}: {program.source!r}: {reason}")


class _Request:
    """One request's bindings; variables filled in as expressions need them."""

    def __init__(self, policy: CompiledPolicy, request: Mapping[str, Any]) -> None:
        self.policy = policy
        self.variables: dict[str, Any] = {}
        self.failed: dict[str, EvaluationError] = {}
        self.computed = not policy.variables
        self.variables_read = False  # the current binding has read ``variables``
        self.stale = False  # ... and a variable was added since
        self.data = {k: v for k, v in request.items() if v is not None}
        self.data["params"] = policy.params
        self.data["variables"] = self.variables
        self.activation: Any = None
        self.programs = dict(policy.variables)

    def _compute_variables(self) -> None:
        """Every variable, in declaration order, at the first expression that reads one.

        cel-cpp converts a bound map once, at its first read, so a variable added after
        ``variables`` was read needs a new binding, and the request's maps converted again
        (docs/performance.md, CEL node policies): computing them together, before the
        expressions that read them, keeps one conversion when variables do not read each
        other."""
        self.computed = True
        for name, program in self.programs.items():
            try:
                self.variables[name] = self.run(program)
            except EvaluationError as exc:
                # Left unbound: an expression fails only if it does read it (a has() or a
                # short-circuit may guard the read), and then with the variable's own error.
                self.failed[name] = exc
            self.stale = self.stale or self.variables_read

    def run(self, program: Program) -> Any:
        if program.needs:
            if not self.computed:
                self._compute_variables()
            if self.stale:  # this binding read ``variables`` before the last one was added
                self.activation = None
            self.variables_read = True
        if self.activation is None:  # cheap: the request's maps are converted when read
            self.activation = eval_env().Activation(self.data)
            self.stale = False
            self.variables_read = bool(program.needs)
        try:
            value = program.program.eval(self.activation)
            if value.type() == _ERROR:  # cel-cpp returns most evaluation errors as a value
                raise RuntimeError(str(value.plain_value()))
        except (RuntimeError, ValueError, TypeError) as exc:
            for name in program.needs:
                if name in self.failed:
                    raise self.failed[name] from None
            raise EvaluationError(program, str(exc).removesuffix(" [INTERNAL]")) from None
        try:
            return value.plain_value()
        except (RuntimeError, TypeError):
            raise EvaluationError(program, f"a {value.type().name()} value is not data (end an "
                                  "optional with .orValue(...))") from None

    def boolean(self, program: Program) -> bool:
        value = self.run(program)
        if not isinstance(value, bool):
            raise EvaluationError(program, f"expected a bool, got {type(value).__name__}")
        return value


def _merge_into(into: dict[str, Any], partial: Mapping[str, Any]) -> None:
    for key, value in partial.items():
        inner = into.get(key)
        if isinstance(inner, dict) and isinstance(value, Mapping):
            _merge_into(inner, value)
        elif isinstance(inner, list) and isinstance(value, list):
            inner.extend(value)
        else:
            into[key] = value


def _mutate(policy: CompiledPolicy, values: Iterable[Any]) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    for (kind, program), value in zip(policy.mutations, values, strict=True):
        if kind is PatchType.JSON_PATCH:
            try:
                doc = json_patch.apply(doc, value)
            except ValueError as exc:
                raise EvaluationError(program, str(exc)) from None
        elif isinstance(value, dict):
            _merge_into(doc, value)
        elif value is not None:
            raise EvaluationError(program, f"expected a map, got {type(value).__name__}")
    return doc


def _change(event: EventName, request: Mapping[str, Any], doc: dict[str, Any]) -> Decision:
    """The merged mutations as a decision (``mutation_check.change``: a document outside the
    reply contract raises ``ValueError`` naming the field, handled by the policy's
    failurePolicy). Its maps' keys sorted first: cel-cpp's map order varies, and so would the
    reply and which of several bad keys an error names."""
    container = request.get("container") or {}
    return mutation_check.change(event, str(container.get("id", "")),
                                 mutation_check.sorted_doc(doc))


@dataclass(slots=True)
class _Outcome:
    applies: bool
    failed: list[tuple[int, str]] = field(default_factory=list)  # validation index, message
    warnings: list[str] = field(default_factory=list)
    audit: Sequence[Any] = ()
    mutations: Iterable[Any] = ()  # the mutations' values, computed when iterated


def _exact(req: _Request) -> _Outcome:
    """Expression by expression, in the VAP order; raises ``EvaluationError``."""
    policy = req.policy
    errors = []
    for _, condition in policy.conditions:  # as the API server: a false one wins over an error
        try:
            if not req.boolean(condition):
                return _Outcome(applies=False)
        except EvaluationError as exc:
            errors.append(exc)
    if errors:
        raise errors[0]
    out = _Outcome(applies=True)
    for i, v in enumerate(policy.validations):
        if req.boolean(v.expression):
            continue
        message = v.message or f"failed expression: {v.expression.source}"
        if v.message_expression is not None:
            try:
                message = str(req.run(v.message_expression))
            except EvaluationError as exc:  # as the API server: fall back, and say so
                out.warnings.append(f"{policy.name}: messageExpression failed: {exc}")
        out.failed.append((i, message))
    out.audit = [req.run(program) for _, program in policy.audit]
    out.mutations = (req.run(program) for _, program in policy.mutations)
    return out


def _from_program(policy: CompiledPolicy, found: ProgramResult) -> _Outcome:
    """The outcome of a policy that applies, from its one program's values."""
    out = _Outcome(applies=True, audit=found.audit, mutations=found.mutations)
    for i, (v, failure) in enumerate(zip(policy.validations, found.failures, strict=True)):
        if failure is not None:
            out.failed.append((i, str(failure[0]) if failure else
                               v.message or f"failed expression: {v.expression.source}"))
    return out


def evaluate(policy: CompiledPolicy, event: EventName, request: Mapping[str, Any],
             tally: Tally, found: Answer = NOT_RUN) -> Decision | None:
    """What ``policy`` says about ``request`` (None: it does not apply or has nothing to say).
    ``found``: its program's answer when the caller ran it (joined with others'), else the
    program runs here."""
    if event not in policy.events:
        return None
    if found is NOT_RUN:
        found = (policy_program.run(policy.program, request, policy.plain)
                 if policy.program is not None else None)
    if found is ALL_HOLD:  # the common answer, without building one
        tally.evaluated(policy.name)
        return None
    if found is DOES_NOT_APPLY:
        return None
    try:
        out = _exact(_Request(policy, request)) if found is None else _from_program(policy, found)
        if not out.applies:
            return None
        tally.evaluated(policy.name)
        warnings = out.warnings
        for i, _ in out.failed:
            tally.failed(policy.name, i, sorted(policy.actions))
        for (key, _), value in zip(policy.audit, out.audit, strict=True):
            if value is not None:
                warnings.append(f"{policy.name}/{key}: {value}")
        failed = [message for _, message in out.failed]
        change = (_change(event, request, _mutate(policy, out.mutations)) if policy.mutations
                  and not (failed and ValidationAction.DENY in policy.actions) else None)
    except (EvaluationError, ValueError) as exc:
        tally.evaluated(policy.name)
        tally.error(policy.name, rejected=policy.fail)
        if policy.fail:
            return Decision(reject=f"{policy.name}: {exc}")
        return Decision(warnings=(f"{policy.name}: ignored (failurePolicy: Ignore): {exc}",))
    reject = None
    if failed:
        text = "; ".join(failed)
        if ValidationAction.DENY in policy.actions:
            reject = f"{policy.name}: {text}"
        if ValidationAction.WARN in policy.actions:
            warnings += [f"{policy.name}: {m}" for m in failed]
        if ValidationAction.AUDIT in policy.actions:
            log.info("cel policy %s failed validation (audit): %s uid=%s", policy.name, text,
                     request.get("uid", ""))
    base = change or Decision()
    if reject is None and not warnings and change is None:
        return None
    return Decision(adjust=base.adjust, update=base.update, reject=reject,
                    warnings=tuple(warnings))


def evaluate_all(in_force: InForce, event: EventName, body: bytes, tally: Tally
                 ) -> list[tuple[str, Decision]]:
    """What each policy in force on ``event`` says about the request ``body``, by name (those
    with something to say): the request's read part decoded once, their programs run as one
    (``policy_program.run_joined``), each policy's answer then acted on by ``evaluate``."""
    request = in_force.view.decode(body)
    found = (policy_program.run_joined(in_force.program, request, in_force.plains)
             if in_force.program is not None else (NOT_RUN,) * len(in_force.policies))
    out = []
    for policy, answer in zip(in_force.policies, found, strict=True):
        decision = evaluate(policy, event, request, tally, answer)
        if decision is not None:
            out.append((policy.name, decision))
    return out
