"""Compiling a ``NodePolicy`` as the API server compiles a VAP: every expression type-checked.

Owns turning a read document (``node_policy_doc.Source``) into a ``CompiledPolicy``: each expression
is compiled and type-checked once per event the policy handles, against that event's request
types (``schema_types``), with ``params`` as dyn and ``variables`` as a map of the policy's
variables (a name not declared earlier in ``spec.variables`` is refused here); result types are
checked (conditions and validations bool, messages and annotation values string, mutations a
map or a JSON Patch list), and what a mutation fixes at load is checked against the event's
reply (``mutation_check``: a field the event cannot change, a constant outside the contract).
Any problem raises ``PolicyLoadError`` naming the policy, the key,
the expression and the checker's complaint (``undefined field 'resource' not found in struct
'nriwebhook.LinuxContainer'``); so does an expression over the static cost limit (``cost``).
The programs kept for evaluation come from a second, untyped environment: requests are bound as
JSON maps. Must not evaluate anything.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cel_expr_python import cel
from google.protobuf.message import DecodeError

from policy_server import EventName, PolicyLoadError
from policy_server.policies.cel import (
    cost,
    library,
    mutation_check,
    policy_program,
    references,
    schema_types,
)
from policy_server.policies.cel.node_policy_doc import (
    PatchType,
    Source,
    ValidationAction,
    read_params,
)
from policy_server.policies.cel.references import Path as ReadPath

# Events whose reply carries a change to the event's own container (docs/webhooks.md).
MUTABLE_EVENTS = frozenset({EventName.CREATE_CONTAINER, EventName.UPDATE_CONTAINER})
_VARIABLE_REF = re.compile(r"\bvariables\.([A-Za-z_][A-Za-z0-9_]*)")
_BOOL = ("bool", "dyn")
_STRING = ("string", "dyn")
_AUDIT = ("string", "dyn", "null")  # a null value: no annotation


@dataclass(frozen=True, slots=True)
class Program:
    """One compiled expression: where it came from, and what it reads of ``variables``."""

    key: str  # spec.validations[0].expression
    source: str
    program: Any  # cel.Expression
    needs: tuple[str, ...]  # variables it reads, in declaration order
    reads: frozenset[ReadPath] | None  # request paths it reads (None: it may read anything)


@dataclass(frozen=True, slots=True)
class CompiledValidation:
    expression: Program
    message: str | None
    message_expression: Program | None


@dataclass(frozen=True, slots=True)
class CompiledPolicy:
    name: str
    file: Path
    events: frozenset[EventName]
    fail: bool  # failurePolicy: Fail
    conditions: tuple[tuple[str, Program], ...]
    variables: tuple[tuple[str, Program], ...]
    params: Any
    params_file: Path | None
    validations: tuple[CompiledValidation, ...]
    actions: frozenset[ValidationAction]
    audit: tuple[tuple[str, Program], ...]
    mutations: tuple[tuple[PatchType, Program], ...]
    program: Any  # every expression as one cel.Expression (``policy_program``), or None
    program_source: str | None  # its text, when there is one
    plain: tuple[bool, ...]  # per validation: it has no messageExpression
    reads: frozenset[ReadPath] | None  # request paths the policy reads (None: anything)

    def programs(self) -> Iterator[Program]:
        yield from (p for _, p in self.conditions)
        yield from (p for _, p in self.variables)
        for v in self.validations:
            yield v.expression
            if v.message_expression is not None:
                yield v.message_expression
        yield from (p for _, p in self.audit)
        yield from (p for _, p in self.mutations)


@functools.cache
def _check_env(event: EventName, events: frozenset[EventName] = frozenset()) -> Any:
    """``event``'s variables, and those only the policy's other ``events`` carry (a policy on
    CreateContainer and UpdateContainer reads ``linux_resources`` behind ``event ==
    'UpdateContainer'``: on CreateContainer it is unbound, an error if read)."""
    declared = dict(schema_types.declarations(event))
    for other in sorted(events):
        for name, kind in schema_types.declarations(other).items():
            declared.setdefault(name, kind)
    variables = {**declared, "params": cel.Type.DYN,
                 "variables": cel.Type.Map(cel.Type.STRING, cel.Type.DYN)}
    return cel.NewEnv(schema_types.pool(), variables=variables, extensions=library.extensions())


@functools.cache
def _request_keys() -> frozenset[str]:
    return frozenset(k for e in EventName for k in schema_types.request_keys(e))


@functools.cache
def eval_env() -> Any:
    variables = {n: cel.Type.DYN for n in (*sorted(_request_keys()), "params", "variables")}
    return cel.NewEnv(variables=variables, extensions=library.extensions())


_Q1, _Q2 = "'", '"'
_STRINGS = "|".join((_Q1 * 3 + r"[\s\S]*?" + _Q1 * 3, _Q2 * 3 + r"[\s\S]*?" + _Q2 * 3,
                     _Q1 + r"(?:\\.|[^'\\\n])*" + _Q1, _Q2 + r'(?:\\.|[^"\\\n])*' + _Q2))
_TOKENS = re.compile(rf"(?P<string>[rRbB]{{0,2}}(?:{_STRINGS}))|(?P<comment>//[^\n]*)"
                     r"|(?P<null>(?<![\w.])null(?!\w))")


def _null_as_dyn(source: str) -> str:
    """``source`` with each ``null`` literal (not in a string or a comment) as ``dyn(null)``."""
    return _TOKENS.sub(lambda m: "dyn(null)" if m.group("null") else m.group(0), source)


def _first_line(error: Exception) -> str:
    text = str(error).removeprefix("INVALID_ARGUMENT: ")
    lines = [ln for ln in text.splitlines() if ln.startswith("ERROR:")] or [text]
    return re.sub(r"^ERROR: <input>:", "at ", lines[0]).removesuffix(" [INVALID_ARGUMENT]")


class _Compiler:
    def __init__(self, source: Source, params: Any) -> None:
        self.source = source
        self.spec = source.doc.spec
        self.params = params
        self.declared: list[str] = []

    def error(self, key: str, message: str) -> PolicyLoadError:
        return PolicyLoadError(f"NodePolicy {self.source.name} ({self.source.file}): {key}: "
                               f"{message}")

    def compile(self, key: str, source: str, results: tuple[str, ...]) -> Program:
        needs = []
        for name in _VARIABLE_REF.findall(source):
            if name not in self.declared:
                raise self.error(key, f"{source!r}: variables.{name} is not declared "
                                 f"{'earlier ' if key.startswith('spec.variables') else ''}"
                                 "in spec.variables")
            needs.append(name)
        text = source  # what is compiled: a nullable string's null as dyn(null)
        for event in sorted(self.spec.events):
            try:
                checked = _check_env(event, frozenset(self.spec.events)).compile(source)
            except RuntimeError as exc:
                checked = self._nullable(source, event, results)
                text = _null_as_dyn(source)
                if checked is None:
                    raise self.error(key, f"{source!r} ({event}): {_first_line(exc)}") from None
            got = checked.return_type().name().lower()
            if results and not any(got.startswith(r) for r in results):
                raise self.error(key, f"{source!r} ({event}): must be {results[0]}, is {got}")
        order = [n for n in self.declared if n in needs]
        program = eval_env().compile(text)
        iterations = cost.estimate(program, self.params)
        if iterations is not None and iterations > cost.MAX_ESTIMATED_ITERATIONS:
            raise self.error(key, f"{source!r}: estimated cost {iterations:,} comprehension "
                             f"iterations exceeds the limit of {cost.MAX_ESTIMATED_ITERATIONS:,} "
                             f"(a list from the request counts as {cost.REQUEST_LIST_ITEMS:,} "
                             "items: nest fewer comprehensions over request lists)")
        return Program(key, source, program, tuple(order),
                       references.paths(program, _request_keys()))

    def _nullable(self, source: str, event: EventName, results: tuple[str, ...]) -> Any:
        """A string result that may be null (an audit annotation's ``c ? 'text' : null``: null
        is none): the checker unifies no string with null_type, so ``null`` is checked as
        ``dyn(null)``; None if that does not check either, or the result is no string."""
        if results != _AUDIT:
            return None
        try:
            return _check_env(event, frozenset(self.spec.events)).compile(_null_as_dyn(source))
        except RuntimeError:
            return None

    def check_mutation(self, kind: PatchType, program: Program) -> None:
        """What the mutation fixes at load (its map's constant keys and values, a JSON Patch's
        constant paths) against each event's reply (``mutation_check``)."""
        try:
            expr = references.tree(program.program)
        except (DecodeError, ValueError):
            return  # a tree we cannot read: the run-time check alone
        for event in sorted(self.spec.events):
            try:
                mutation_check.check(event, kind, expr, self.params)
            except ValueError as exc:
                raise self.error(program.key, f"{program.source!r} ({event}): {exc}") from None

    def named(self, key: str, items: tuple[Any, ...], results: tuple[str, ...]
              ) -> Iterator[tuple[str, Program]]:
        for i, item in enumerate(items):
            yield item.name, self.compile(f"{key}[{i}].expression", item.expression, results)


def compile_policy(source: Source) -> CompiledPolicy:
    """``source`` compiled and checked; raises ``PolicyLoadError``."""
    params, params_file = read_params(source)
    c = _Compiler(source, params)
    spec = c.spec
    if spec.mutations and not set(spec.events) <= MUTABLE_EVENTS:
        others = ", ".join(sorted(set(spec.events) - MUTABLE_EVENTS))
        raise c.error("spec.mutations", f"only CreateContainer and UpdateContainer carry a "
                      f"change to their container; this policy also handles {others}")
    conditions = tuple(c.named("spec.matchConditions", spec.match_conditions, _BOOL))
    variables = []
    for i, var in enumerate(spec.variables):
        if var.name in c.declared:
            raise c.error(f"spec.variables[{i}].name", f"{var.name} is declared twice")
        variables.append((var.name, c.compile(f"spec.variables[{i}].expression",
                                              var.expression, ())))
        c.declared.append(var.name)
    validations = []
    for i, v in enumerate(spec.validations):
        key = f"spec.validations[{i}]"
        message = (c.compile(f"{key}.messageExpression", v.message_expression, _STRING)
                   if v.message_expression else None)
        validations.append(CompiledValidation(c.compile(f"{key}.expression", v.expression, _BOOL),
                                              v.message, message))
    audit = tuple((a.key, c.compile(f"spec.auditAnnotations[{i}].valueExpression",
                                    a.value_expression, _AUDIT))
                  for i, a in enumerate(spec.audit_annotations))
    mutations = tuple(
        (m.patch_type, c.compile(f"spec.mutations[{i}].expression", m.expression,
                                 ("map", "dyn") if m.patch_type is PatchType.APPLY_CONFIGURATION
                                 else ("list", "dyn")))
        for i, m in enumerate(spec.mutations))
    for kind, program in mutations:
        c.check_mutation(kind, program)
    if not (validations or audit or mutations):
        raise c.error("spec", "has no validations, auditAnnotations or mutations: it does nothing")
    params_literal = policy_program.literal(params)
    one_source = None if params_literal is None else policy_program.source(
        [p.source for _, p in conditions], [(n, p.source) for n, p in variables],
        [(v.expression.source, v.message_expression.source if v.message_expression else None)
         for v in validations], [p.source for _, p in audit], [p.source for _, p in mutations],
        params_literal)
    program = _unchecked(one_source)
    policy = CompiledPolicy(source.name, source.file, frozenset(spec.events),
                            spec.failure_policy == "Fail", conditions, tuple(variables), params,
                            params_file, tuple(validations), frozenset(spec.validation_actions),
                            audit, mutations, program,
                            one_source if program is not None else None,
                            tuple(v.message_expression is None for v in validations), None)
    return dataclasses.replace(policy, reads=_reads(policy))


def joined_program(policies: Sequence[CompiledPolicy]) -> Any:
    """The programs of ``policies`` (those that have one) as one (``policy_program.joined``);
    None when fewer than two have one, or the joined text does not compile."""
    sources = [p.program_source for p in policies if p.program_source is not None]
    return _unchecked(policy_program.joined(sources)) if len(sources) > 1 else None


def _unchecked(source: str | None) -> Any:
    """``source`` compiled without the type checker (its parts were checked one by one); None
    for no source (params without a literal: every request takes the exact path), or a program
    too deep or too long for the parser (each expression compiled alone)."""
    if source is None:
        return None
    try:
        return eval_env().compile(source, disable_check=True)
    except (RuntimeError, ValueError):  # ValueError: text cel-cpp cannot take (a lone surrogate)
        return None


def _reads(policy: CompiledPolicy) -> frozenset[ReadPath] | None:
    """Every request path ``policy`` reads, and what evaluating it needs besides (the uid for
    the audit log, the container's id for an UpdateContainer change)."""
    found: set[ReadPath] = {ReadPath(("uid",))}
    if policy.mutations:
        found.add(ReadPath(("container", "id")))
    for program in policy.programs():
        if program.reads is None:
            return None
        found |= program.reads
    return frozenset(found)
