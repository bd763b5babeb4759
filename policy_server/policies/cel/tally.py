"""What the NodePolicies did, counted per policy and per validation.

Owns ``Tally``: the counts ``program.evaluate`` records (a policy applied, a validation failed
and what its ``validationActions`` did, an expression error and what ``failurePolicy`` made of
it), shown on the state page (``counts()``) and exported to Prometheus through the SDK's
``Policy.counters`` (``samples()``): ``policy_cel_evaluations_total{node_policy}``,
``policy_cel_validation_failures_total{node_policy, validation, action}`` and
``policy_cel_errors_total{node_policy, outcome}``. Label values are the ``metadata.name``s and
validation indexes of the loaded files and the fixed action and outcome names, never anything
from a request, so their number is bounded by the files. Counts survive reloads (a counter
never goes down). Must not evaluate.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator

from policy_server import CounterSample

_EVALUATIONS = ("evaluations", "Requests a NodePolicy applied to (its matchConditions held, "
                "or an expression failed)")
_FAILURES = ("validation_failures",
             "Validations that failed, by NodePolicy, validation and validationAction taken")
_ERRORS = ("errors", "Expression errors, by NodePolicy and what failurePolicy made of them "
           "(rejected: Fail, ignored: Ignore)")


class Tally:
    def __init__(self) -> None:
        self._evaluations: Counter[str] = Counter()
        self._failures: Counter[tuple[str, int, str]] = Counter()
        self._errors: Counter[tuple[str, str]] = Counter()

    def evaluated(self, policy: str) -> None:
        self._evaluations[policy] += 1

    def failed(self, policy: str, validation: int, actions: Iterable[str]) -> None:
        for action in actions:
            self._failures[policy, validation, action] += 1

    def error(self, policy: str, rejected: bool) -> None:
        self._errors[policy, "rejected" if rejected else "ignored"] += 1

    def counts(self) -> dict[str, int]:
        """For the state page: ``<policy>/evaluated``, ``<policy>/validations[i]/<Action>``,
        ``<policy>/errors/<outcome>``."""
        out = {f"{p}/evaluated": n for p, n in self._evaluations.items()}
        out |= {f"{p}/validations[{i}]/{a}": n for (p, i, a), n in self._failures.items()}
        out |= {f"{p}/errors/{o}": n for (p, o), n in self._errors.items()}
        return dict(sorted(out.items()))

    def samples(self) -> Iterator[CounterSample]:
        for policy, n in self._evaluations.items():
            yield CounterSample(*_EVALUATIONS, (("node_policy", policy),), n)
        for (policy, i, action), n in self._failures.items():
            labels = (("node_policy", policy), ("validation", f"validations[{i}]"),
                      ("action", action))
            yield CounterSample(*_FAILURES, labels, n)
        for (policy, outcome), n in self._errors.items():
            yield CounterSample(*_ERRORS, (("node_policy", policy), ("outcome", outcome)), n)
