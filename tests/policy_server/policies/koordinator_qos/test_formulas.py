"""docs/koordinator.md#formulas: the shared formulas and the worked examples listed there,
literally."""

from __future__ import annotations

import pytest

from bridge.contract.quantity import value_of as quantity_value
from policy_server.policies.koordinator_qos.formulas import (
    memory_limit,
    milli_cpu_to_quota,
    milli_cpu_to_shares,
    scale_quota,
)

GI = 1024**3


def test_spec_example_two_cores_request_and_limit_4gi() -> None:
    # "2 cores req+limit / 4Gi -> shares 2048, quota 200000, limit 4294967296"
    assert milli_cpu_to_shares(2000) == 2048
    assert milli_cpu_to_quota(2000) == 200000
    assert memory_limit(quantity_value("4Gi")) == 4294967296


def test_spec_example_no_resources() -> None:
    # "no resources -> shares 2, quota -1, limit -1"
    assert milli_cpu_to_shares(0) == 2
    assert milli_cpu_to_quota(0) == -1
    assert memory_limit(0) == -1


def test_spec_example_batch_500() -> None:
    # "batch 500 -> shares 512, quota 50000" (batch-cpu is in milli-cores)
    assert milli_cpu_to_shares(quantity_value("500")) == 512
    assert milli_cpu_to_quota(quantity_value("500")) == 50000


@pytest.mark.parametrize(
    ("quota", "ratio", "expected"),
    [
        (50000, 1.2, 41667),  # ceil(50000/1.2)=41667
        (100000, 1.2, 83334),  # ceil(100000/1.2)=83334
        (100000, 1.0, 100000),  # ratio must be > 1
        (100000, 0.8, 100000),
        (100000, None, 100000),
        (-1, 1.5, -1),  # only quota > 0 is scaled
        (0, 1.5, 0),
    ],
)
def test_scale_quota(quota: int, ratio: float | None, expected: int) -> None:
    assert scale_quota(quota, ratio) == expected


@pytest.mark.parametrize(
    ("milli", "shares"),
    [(-5, 2), (0, 2), (1, 2), (2, 2), (3, 3), (1000, 1024), (500, 512), (10**9, 262144)],
)
def test_shares_clamped(milli: int, shares: int) -> None:
    assert milli_cpu_to_shares(milli) == shares


@pytest.mark.parametrize(
    ("milli", "quota"), [(-1, -1), (0, -1), (1, 1000), (9, 1000), (10, 1000), (11, 1100)]
)
def test_quota_minimum(milli: int, quota: int) -> None:
    assert milli_cpu_to_quota(milli) == quota


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500", 500),
        ("2k", 2000),
        ("2Gi", 2 * GI),
        ("1.5", 2),  # Value() rounds up
        ("100m", 1),
        ("1e3", 1000),
        ("1E-3", 1),
        ("512Mi", 512 * 1024**2),
        (".5Ki", 512),
        (3, 3),
        ("-1", -1),
        ("1e99", 2**63 - 1),  # the API server caps, it does not reject
        ("1Ei", 2**60),
    ],
)
def test_quantity_value(text: object, value: int) -> None:
    assert quantity_value(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1K", "1 Gi", "Gi", True, None, [1]])
def test_quantity_rejects(text: object) -> None:
    with pytest.raises(ValueError, match="expected a quantity"):
        quantity_value(text)
