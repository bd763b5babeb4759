"""docs/koordinator.md#cpuweight-on-cgroup-v2: the two shares -> weight formulas runtimes use,
checked against the math worked out here (not against each other), their inverse, and the
verdict on which one a node's containers show."""

from __future__ import annotations

import logging
import math
from decimal import ROUND_CEILING, Decimal, localcontext
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policy_server.node.cpu_weight import (
    CpuWeights,
    WeightFormula,
    WeightSetting,
    detect,
    linear_weight,
    quadratic_weight,
    to_weight,
)

LINEAR, QUADRATIC = WeightFormula.LINEAR, WeightFormula.QUADRATIC


def smallest_shares(formula: WeightFormula, weight: int) -> int:
    """The smallest shares `formula` turns into `weight` or more (both are non-decreasing)."""
    low, high = 2, 262144
    while low < high:
        middle = (low + high) // 2
        if to_weight(formula, middle) >= weight:
            high = middle
        else:
            low = middle + 1
    return low


def exact_linear(shares: int) -> int:
    return 1 + math.floor(Fraction((shares - 2) * 9999, 262142))


def exact_quadratic(shares: int) -> int:
    """ceil(10^((L^2 + 125 L) / 612 - 7/34)), L = log2(shares), to 50 digits; for a power of
    two 2^k the exponent is the rational (k - 1)(k + 126) / 612, taken exactly."""
    if shares & (shares - 1) == 0:
        k = shares.bit_length() - 1
        exponent = Fraction((k - 1) * (k + 126), 612)
        if exponent.denominator == 1:
            whole: int = 10 ** int(exponent)  # int ** int is typed Any: the exponent may be < 0
            return whole
    with localcontext() as ctx:
        ctx.prec = 50
        level = Decimal(shares).ln() / Decimal(2).ln()
        power = Decimal(10) ** ((level * level + 125 * level) / 612 - Decimal(7) / 34)
        return int(power.to_integral_value(rounding=ROUND_CEILING))


@pytest.mark.parametrize(
    ("shares", "linear", "quadratic"),
    [
        (2, 1, 1),  # L = 1: exponent (1 + 125)/612 - 7/34 = 0
        (3, 1, 2),
        (512, 20, 59),  # L = 9: exponent 1062/612 - 126/612 = 936/612
        (1024, 39, 100),  # L = 10: exponent 1350/612 - 126/612 = 2, the default weight
        (2048, 79, 174),
        (102400, 3906, 4429),  # L = 16.64: exponent 3.646
        (262144, 10000, 10000),  # L = 18: exponent 2574/612 - 126/612 = 4
    ],
)
def test_known_points(shares: int, linear: int, quadratic: int) -> None:
    assert exact_linear(shares) == linear and exact_quadratic(shares) == quadratic
    assert linear_weight(shares) == to_weight(LINEAR, shares) == linear
    assert quadratic_weight(shares) == to_weight(QUADRATIC, shares) == quadratic


@given(st.integers(min_value=2, max_value=262144))
def test_both_formulas_match_the_math(shares: int) -> None:
    assert linear_weight(shares) == exact_linear(shares)
    assert quadratic_weight(shares) == exact_quadratic(shares)


@pytest.mark.parametrize("formula", list(WeightFormula))
def test_out_of_range_shares_are_clamped(formula: WeightFormula) -> None:
    assert to_weight(formula, 1) == 1
    assert to_weight(formula, 10**7) == 10000


@pytest.mark.parametrize("formula", list(WeightFormula))
@given(weight=st.integers(min_value=1, max_value=10000))
def test_every_weight_is_reached_by_some_shares(formula: WeightFormula, weight: int) -> None:
    shares = smallest_shares(formula, weight)
    assert 2 <= shares <= 262144
    assert to_weight(formula, shares) == weight
    assert shares == 2 or to_weight(formula, shares - 1) < weight  # the smallest such shares


# --- which formula the node shows ---------------------------------------------------------

SHARES = (1024, 512, 2048, 102400)


def test_linear_weights_mean_linear() -> None:
    verdict = detect([(s, exact_linear(s)) for s in SHARES])
    assert verdict.formula is LINEAR and (verdict.linear, verdict.quadratic) == (4, 0)


def test_quadratic_weights_mean_quadratic() -> None:
    verdict = detect([(s, exact_quadratic(s)) for s in SHARES])
    assert verdict.formula is QUADRATIC and (verdict.linear, verdict.quadratic) == (0, 4)


def test_one_weight_changed_by_someone_does_not_hide_the_formula() -> None:
    verdict = detect([(1024, 100), (512, 59), (2048, 5)])
    assert verdict.formula is QUADRATIC and verdict.unexplained == 1


@pytest.mark.parametrize(
    "observations",
    [
        [],
        [(2, 1), (262144, 10000)],  # both formulas give these weights
        [(0, 100)],  # shares unset: the runtime wrote no weight
        [(1024, 7)],  # neither formula
    ],
)
def test_no_telling_observation_no_verdict(observations: list[tuple[int, int]]) -> None:
    verdict = detect(observations)
    assert verdict.formula is None and verdict.reason


def test_containers_that_disagree_leave_it_to_the_setting() -> None:
    verdict = detect([(1024, 39), (1024, 100)])  # e.g. started before and after a runc upgrade
    assert verdict.formula is None and "--cpu-weight-formula" in verdict.reason


def test_a_setting_is_never_second_guessed() -> None:
    weights = CpuWeights(WeightSetting.LINEAR)
    assert weights.learn([(1024, 100)]) is LINEAR
    assert weights.for_writes is LINEAR


def test_auto_learns_once_and_says_each_state_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "policy_server.node.cpu_weight")
    weights = CpuWeights()
    assert weights.to_json() == {"setting": "auto", "formula": None, "reason": "not observed yet"}
    assert weights.learn([]) is None and weights.learn([(2, 1)]) is None
    assert weights.for_writes is LINEAR  # until learned
    assert weights.learn([(1024, 100)]) is QUADRATIC
    assert weights.learn([(1024, 39)]) is QUADRATIC  # learned once, kept
    assert weights.to_json()["formula"] == "quadratic"
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert "not known yet" in lines[0] and "not judged" in lines[0]
    assert lines[1].startswith("cpu.weight formula of the runtime: quadratic")
