"""CPUNormalization (docs/koordinator.md#cpunormalization)."""

from __future__ import annotations

import pytest

from policy_server.policies.koordinator_qos.hooks import normalization
from policy_server.policies.koordinator_qos.target import Stage
from tests.policy_server.factory import TRUST_LABEL, container_target, rules

RS = "scheduling.koordinator.sh/resource-status"
CREATE, UPDATE, RECONCILE = Stage.CREATE_CONTAINER, Stage.UPDATE_CONTAINER, Stage.RECONCILE

# (case, qos, pinned, base quota, ratio, stage, expected quota or None)
CASES = [
    ("LS scaled", "LS", False, 100000, 1.2, CREATE, 83334),
    ("unlabeled scaled", None, False, 50000, 1.2, UPDATE, 41667),
    ("unlabeled but pinned counts as LSR", None, True, 100000, 1.2, CREATE, None),
    ("LSR untouched", "LSR", False, 100000, 1.2, CREATE, None),
    ("BE untouched", "BE", False, 100000, 1.2, CREATE, None),
    ("SYSTEM untouched", "SYSTEM", False, 100000, 1.2, CREATE, None),
    ("no quota", "LS", False, None, 1.2, CREATE, None),
    ("unlimited quota", "LS", False, -1, 1.2, CREATE, None),
    ("no ratio", "LS", False, 100000, None, CREATE, None),
    ("ratio <= 1 at create: no-op, not re-emitted", "LS", False, 100000, 1.0, CREATE, None),
    ("reconcile from the unscaled base", "LS", False, 100000, 1.2, RECONCILE, 83334),
    ("reconcile restores the base when the ratio drops to 1", "LS", False, 100000, 1.0,
     RECONCILE, 100000),
    ("reconcile restores the base when the ratio is removed", "LS", False, 100000, None,
     RECONCILE, 100000),
]


@pytest.mark.parametrize(
    ("qos", "pinned", "base", "ratio", "stage", "expected"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_normalization(
    qos: str | None, pinned: bool, base: int | None, ratio: float | None, stage: Stage,
    expected: int | None,
) -> None:
    annotations = {RS: {"cpuset": "1"}} if pinned else {}
    target = container_target(quota=base, qos=qos, annotations=annotations, trust=TRUST_LABEL)
    doc = {} if ratio is None else {"cpu_normalization_ratio": ratio}
    result = normalization.container(target, stage, rules(**doc))
    got = None if result is None else result.resources.cpu_quota
    assert got == expected


def test_reconcile_without_a_known_base_warns_and_leaves_the_quota() -> None:
    target = container_target(quota=None, qos="LS")
    result = normalization.container(target, RECONCILE, rules(cpu_normalization_ratio=1.2))
    assert result is not None and result.resources.is_empty()
    assert result.warnings == (normalization.UNKNOWN_BASE,)


def test_malformed_resource_status_does_not_stop_normalization() -> None:
    # koordlet's normalization does not depend on parsing the resource-status; an unlabeled pod
    # whose annotation cannot be read is simply not known to be pinned.
    target = container_target(quota=100000, annotations={
        "scheduling.koordinator.sh/resource-status": "{not json"})  # fmt: skip
    result = normalization.container(target, Stage.CREATE_CONTAINER,
                                     rules(cpu_normalization_ratio=1.2))  # fmt: skip
    assert result is not None and result.resources.cpu_quota == 83334  # ceil(100000 / 1.2)
