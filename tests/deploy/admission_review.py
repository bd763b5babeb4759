"""Running a ValidatingAdmissionPolicy's CEL on AdmissionReview-shaped requests, offline.

Owns: ``AdmissionPolicy`` (a rendered ValidatingAdmissionPolicy, its bindings and the params
objects they name) and its ``review(request)``: the API server's order of work for each binding
(docs: "Validating Admission Policy"), a refusal by one refusing the request: the policy's
``matchConstraints.resourceRules`` and the binding's ``matchResources.resourceRules`` (group,
version, operation, resource and subresource, with the ``*`` forms), the params (missing:
``parameterNotFoundAction``), ``matchConditions`` (a false one skips the policy, an error
follows ``failurePolicy``), ``variables`` in declaration order, then ``validations`` (a false
one refuses with its ``messageExpression``, else ``message``). Requests are built by
``request(...)`` with ``object``, ``oldObject`` (None on CREATE), ``userInfo``, ``operation``,
``namespace``, ``resource`` and ``subResource`` as an AdmissionReview carries them.

The expressions run on cel-expr-python with the library the policy server's ``cel`` policies
get (``policy_server.policies.cel.library``: cel-cpp's strings, optional, bindings and math
extensions, plus Kubernetes' quantity, regex and list functions), so ``split``, ``trim``,
``replace``, ``join``, ``startsWith``, ``endsWith``, ``has``, ``exists``, ``all``, ``filter`` and
``map`` behave as in the API server. What differs from the API server: the requests are untyped
JSON maps (the API server also type-checks against the Pod's OpenAPI schema), every variable is
computed eagerly (the API server computes one when it is first read), and there is no cost
budget, ``authorizer`` or ``namespaceObject``.

Must not: start processes, touch the network, or know expected verdicts; the assertions live
in the test modules.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cel_expr_python import cel

from policy_server.policies.cel import library


@dataclass(frozen=True)
class Verdict:
    """What the binding says about one request."""

    matched: bool  # the policy's resource rules and match conditions select the request
    allowed: bool
    message: str = ""


@functools.cache
def _env() -> Any:
    variables = {"object": cel.Type.DYN, "oldObject": cel.Type.DYN, "request": cel.Type.DYN,
                 "params": cel.Type.DYN, "variables": cel.Type.Map(cel.Type.STRING, cel.Type.DYN)}
    return cel.NewEnv(variables=variables, extensions=library.extensions())


class EvaluationError(Exception):
    pass


def _compile(where: str, source: str) -> Any:
    try:
        return _env().compile(source)
    except RuntimeError as exc:
        raise AssertionError(f"{where}: {source!r} does not compile: {exc}") from None


def _run(where: str, program: Any, data: Mapping[str, Any]) -> Any:
    try:
        value = program.eval(_env().Activation(dict(data)))
    except (RuntimeError, ValueError, TypeError) as exc:
        raise EvaluationError(f"{where}: {exc}") from None
    if value.type() == cel.Type.ERROR:
        raise EvaluationError(f"{where}: {value.plain_value()}")
    return value.plain_value()


def _boolean(where: str, program: Any, data: Mapping[str, Any]) -> bool:
    value = _run(where, program, data)
    if not isinstance(value, bool):
        raise EvaluationError(f"{where}: expected a bool, got {type(value).__name__}")
    return value


def _rule_matches(rule: Mapping[str, Any], req: Mapping[str, Any]) -> bool:
    resource = req["resource"]
    sub = req.get("subResource") or ""

    def has(values: list[str], value: str) -> bool:
        return "*" in values or value in values

    if not (has(rule["apiGroups"], resource["group"])
            and has(rule["apiVersions"], resource["version"])
            and has(rule["operations"], req["operation"])):
        return False
    for entry in rule["resources"]:
        name, _, entry_sub = entry.partition("/")
        if not entry_sub:  # "pods", "*": the resource itself, never a subresource
            if not sub and name in ("*", resource["resource"]):
                return True
        elif name in ("*", resource["resource"]) and entry_sub in ("*", sub) and sub:
            return True
    return False


def request(operation: str, obj: Mapping[str, Any] | None, old: Mapping[str, Any] | None = None,
            *, user: str, namespace: str, subresource: str = "",
            groups: tuple[str, ...] = ()) -> dict[str, Any]:
    """An AdmissionReview ``request`` for a pod in ``namespace`` (its object, old object and the
    request's attributes as one map; ``review`` binds them as the API server does)."""
    return {
        "operation": operation,
        "namespace": namespace,
        "name": (obj or old or {}).get("metadata", {}).get("name", ""),
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "subResource": subresource,
        "userInfo": {"username": user, "groups": list(groups)},
        "object": obj,
        "oldObject": old,
    }


class AdmissionPolicy:
    """One ValidatingAdmissionPolicy, its bindings, and the params objects there are (a
    binding's ``paramRef`` names one by name and namespace; one not among them is absent)."""

    def __init__(self, policy: Mapping[str, Any], bindings: Sequence[Mapping[str, Any]],
                 params: Sequence[Mapping[str, Any]]) -> None:
        name = policy["metadata"]["name"]
        assert bindings and all(b["spec"]["policyName"] == name for b in bindings)
        self.spec = policy["spec"]
        self.bindings = [b["spec"] for b in bindings]
        self.params = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in params}
        self.conditions = [(c["name"], _compile(f"matchConditions[{c['name']}]",
                                                c["expression"]))
                           for c in self.spec.get("matchConditions", [])]
        self.variables = [(v["name"], _compile(f"variables[{v['name']}]", v["expression"]))
                          for v in self.spec.get("variables", [])]
        self.validations = [
            (_compile(f"validations[{i}].expression", v["expression"]),
             _compile(f"validations[{i}].messageExpression", v["messageExpression"])
             if "messageExpression" in v else None, v.get("message"))
            for i, v in enumerate(self.spec["validations"])]

    def review(self, req: Mapping[str, Any]) -> Verdict:
        """Every binding's verdict on ``req`` joined: refused if one refuses, matched if one
        matched."""
        verdicts = [self._review(binding, req) for binding in self.bindings]
        refusals = [v for v in verdicts if not v.allowed]
        if refusals:
            return refusals[0]
        return Verdict(matched=any(v.matched for v in verdicts), allowed=True)

    def _failure(self, message: str) -> Verdict:
        fail = self.spec.get("failurePolicy", "Fail") == "Fail"
        return Verdict(matched=True, allowed=not fail, message=message)

    def _params(self, binding: Mapping[str, Any]) -> tuple[bool, Any]:
        """(found, the params object) for ``binding``."""
        ref = binding.get("paramRef")
        if not self.spec.get("paramKind") or ref is None:
            return True, None
        found = self.params.get((ref["namespace"], ref["name"]))
        return found is not None, found

    def _review(self, binding: Mapping[str, Any], req: Mapping[str, Any]) -> Verdict:
        rules = self.spec["matchConstraints"]["resourceRules"]
        narrowed = (binding.get("matchResources") or {}).get("resourceRules")
        if not (any(_rule_matches(r, req) for r in rules)
                and (narrowed is None or any(_rule_matches(r, req) for r in narrowed))):
            return Verdict(matched=False, allowed=True)
        found, params = self._params(binding)
        if not found:
            if binding["paramRef"].get("parameterNotFoundAction", "Allow") == "Allow":
                return Verdict(matched=False, allowed=True)
            return self._failure("params not found")
        data = _bindings(req, params)
        errors = []
        for name, program in self.conditions:
            try:
                if not _boolean(f"matchConditions[{name}]", program, data):
                    return Verdict(matched=False, allowed=True)
            except EvaluationError as exc:
                errors.append(str(exc))
        if errors:
            return self._failure(errors[0])
        try:
            for name, program in self.variables:
                data["variables"] = {**data["variables"],
                                     name: _run(f"variables[{name}]", program, data)}
            for i, (expression, message_expression, message) in enumerate(self.validations):
                if _boolean(f"validations[{i}]", expression, data):
                    continue
                text = (_run(f"validations[{i}].messageExpression", message_expression, data)
                        if message_expression is not None else message)
                return Verdict(matched=True, allowed=False, message=str(text))
        except EvaluationError as exc:
            return self._failure(str(exc))
        return Verdict(matched=True, allowed=True)


def _bindings(req: Mapping[str, Any], params: Any) -> dict[str, Any]:
    """What the expressions see: ``object``, ``oldObject``, ``request`` (the rest of the
    AdmissionReview request), ``params``, and ``variables`` as they are computed."""
    attributes = {k: v for k, v in req.items() if k not in ("object", "oldObject")}
    return {"object": req["object"], "oldObject": req["oldObject"], "request": attributes,
            "params": params, "variables": {}}
