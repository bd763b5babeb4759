"""cgroup v1 ``cpu.shares`` <-> cgroup v2 ``cpu.weight`` the way this node's OCI runtime converts.

On cgroup v2 the runtime, not the kernel, turns an OCI ``linux.resources.cpu.shares`` into
``cpu.weight``, and runtimes disagree (docs/koordinator.md#cpuweight-on-cgroup-v2):

* ``linear``: ``1 + (shares - 2) * 9999 / 262142`` in integers (runc before 1.3.2, crun before
  1.23; what kubelet's vendored runc used for pod slices for years);
* ``quadratic``: ``ceil(10 ** ((L*L + 125*L) / 612 - 7/34))`` with ``L = log2(shares)`` (runc
  1.3.2 and later, crun 1.23 and later): shares 2 -> 1, 1024 -> 100, 262144 -> 10000, so the
  default shares map to the default weight.

Owns both formulas and their inverse, the pure verdict on which one a set of observed
(shares, weight) pairs shows (``detect``), and ``CpuWeights``, the node's setting
(``--cpu-weight-formula``) plus what was learned, logged once. Must not read files: the
reconciler hands in what it read.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

log = logging.getLogger(__name__)

SHARES_MIN, SHARES_MAX = 2, 262_144  # cgroup v1 cpu.shares range (kernel: 2 .. 2^18)
WEIGHT_MIN, WEIGHT_MAX = 1, 10_000  # cgroup v2 cpu.weight range


class WeightFormula(StrEnum):
    LINEAR = "linear"
    QUADRATIC = "quadratic"


class WeightSetting(StrEnum):
    """``--cpu-weight-formula``: a formula, or ``auto`` (learn it from the node)."""

    AUTO = "auto"
    LINEAR = "linear"
    QUADRATIC = "quadratic"


def _clamped(shares: int) -> int:
    return min(max(shares, SHARES_MIN), SHARES_MAX)


def linear_weight(shares: int) -> int:
    return 1 + (_clamped(shares) - 2) * 9999 // 262142


def quadratic_weight(shares: int) -> int:
    shares = _clamped(shares)
    # Both ends exactly (floating point must not push 10^4 past 10000); runtimes special-case
    # them the same way.
    if shares == SHARES_MIN:
        return WEIGHT_MIN
    if shares == SHARES_MAX:
        return WEIGHT_MAX
    level = math.log2(shares)
    exponent = (level * level + 125 * level) / 612 - 7 / 34
    return min(max(math.ceil(10**exponent), WEIGHT_MIN), WEIGHT_MAX)


def to_weight(formula: WeightFormula, shares: int) -> int:
    """The weight ``formula`` gives ``shares`` (clamped to [2, 262144]). Shares 0 mean "unset"
    to runtimes (no weight is written): callers must not convert them."""
    if formula is WeightFormula.QUADRATIC:
        return quadratic_weight(shares)
    return linear_weight(shares)


@dataclass(frozen=True, slots=True)
class FormulaVerdict:
    """What a set of (shares, weight) observations says about the runtime's formula."""

    formula: WeightFormula | None
    linear: int = 0  # observations only the linear formula explains
    quadratic: int = 0  # ... only the quadratic one
    unexplained: int = 0  # neither (changed behind the runtime's back, or another formula)
    reason: str = ""


def detect(observations: Iterable[tuple[int, int]]) -> FormulaVerdict:
    """Which formula produced these (OCI shares, ``cpu.weight`` read) pairs of containers.

    Pairs where both formulas give the same weight (only shares 2 and 262144, or beyond) and
    unset shares (0) say nothing. A verdict needs at least one telling pair and no telling pair for
    the other formula: mixed pairs (e.g. containers started before a runtime upgrade) leave the
    choice to ``--cpu-weight-formula``.
    """
    linear = quadratic = unexplained = 0
    for shares, weight in observations:
        if shares <= 0:
            continue
        by_linear, by_quadratic = linear_weight(shares), quadratic_weight(shares)
        if by_linear == by_quadratic:
            continue
        if weight == by_linear:
            linear += 1
        elif weight == by_quadratic:
            quadratic += 1
        else:
            unexplained += 1
    counts = f"{linear} linear, {quadratic} quadratic, {unexplained} neither"
    if linear and quadratic:
        reason = f"containers disagree ({counts}): set --cpu-weight-formula"
        return FormulaVerdict(None, linear, quadratic, unexplained, reason)
    if not (linear or quadratic):
        reason = f"no container whose shares the two formulas map apart shows either ({counts})"
        return FormulaVerdict(None, linear, quadratic, unexplained, reason)
    formula = WeightFormula.LINEAR if linear else WeightFormula.QUADRATIC
    return FormulaVerdict(formula, linear, quadratic, unexplained, counts)


class CpuWeights:
    """The node's conversion: given by the setting, or learned once from observations."""

    def __init__(self, setting: WeightSetting = WeightSetting.AUTO) -> None:
        self.setting = setting
        self.formula: WeightFormula | None = (
            None if setting is WeightSetting.AUTO else WeightFormula(setting.value)
        )
        self.reason = "not observed yet" if self.formula is None else ""
        self._said_unknown = False

    @property
    def for_writes(self) -> WeightFormula:
        """What pod-level writes use: the known formula, else linear (the older runtimes')
        until learned; the reconciler judges (and rewrites) pod weights only once it is."""
        return self.formula or WeightFormula.LINEAR

    def learn(self, observations: Iterable[tuple[int, int]]) -> WeightFormula | None:
        """The formula, learning it from ``observations`` if it is not known yet."""
        if self.formula is not None:
            return self.formula
        verdict = detect(observations)
        if verdict.formula is None:
            self.reason = verdict.reason
            if not self._said_unknown:
                self._said_unknown = True
                log.info(
                    "cpu.weight formula of the runtime not known yet (%s): container and pod "
                    "weights are not judged as drift until it is (pod writes at RunPodSandbox "
                    "use the linear formula meanwhile)",
                    verdict.reason,
                )
            return None
        self.formula, self.reason = verdict.formula, f"learned: {verdict.reason}"
        log.info("cpu.weight formula of the runtime: %s (%s)", verdict.formula, verdict.reason)
        return self.formula

    def to_json(self) -> dict[str, Any]:
        formula = None if self.formula is None else self.formula.value
        return {"setting": self.setting.value, "formula": formula, "reason": self.reason}
