"""OOMScoreAdj (docs/koordinator.md#oomscoreadj) and Resctrl (docs/koordinator.md#resctrl)."""

from __future__ import annotations

from typing import Any

import pytest

from policy_server.policies.koordinator_qos.annotations import AnnotationError
from policy_server.policies.koordinator_qos.hooks import oom, resctrl
from policy_server.policies.koordinator_qos.target import Stage
from policy_server.sdk.effects import ResctrlGroup, ResctrlGroupRemoval
from tests.policy_server.factory import TRUST_ALL, container_target, pod_target, rules

POD_DEFAULT = "koordinator.sh/oom-score-adj"
PER_CONTAINER = "koordinator.sh/oom-score-adj-spec"


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({POD_DEFAULT: "500"}, 500),
        ({POD_DEFAULT: "-1000"}, -1000),
        ({PER_CONTAINER: {"app": -10}, POD_DEFAULT: "500"}, -10),  # spec wins
        ({PER_CONTAINER: {"other": -10}, POD_DEFAULT: "500"}, 500),  # falls back
        ({PER_CONTAINER: {"other": -10}}, None),
        ({}, None),
    ],
)
def test_oom_score_adj(annotations: dict[str, Any], expected: int | None) -> None:
    # koordinator's semantics (the full range): the annotation is trusted here.
    result = oom.container(container_target(annotations=annotations), Stage.CREATE_CONTAINER,
                           rules(trust=TRUST_ALL))
    assert (None if result is None else result.oom_score_adj) == expected


@pytest.mark.parametrize(
    ("annotations", "fragment"),
    [
        ({POD_DEFAULT: "1001"}, "out of range"),
        ({POD_DEFAULT: "high"}, "not an integer"),
        ({PER_CONTAINER: {"app": 2000}}, "out of range"),
        ({PER_CONTAINER: "[1]"}, "expected a JSON object"),
        ({PER_CONTAINER: "{"}, "not valid JSON"),
    ],
)
def test_bad_oom_values_are_skipped_with_a_warning(
    annotations: dict[str, Any], fragment: str
) -> None:
    result = oom.container(container_target(annotations=annotations), Stage.CREATE_CONTAINER,
                           rules())
    assert result is not None and result.oom_score_adj is None
    assert fragment in result.warnings[0] and "skipped" in result.warnings[0]


RESCTRL = {"node.koordinator.sh/resctrl": {"llc": {"schemata": {"range": [0, 30]}}}}


GROUP = ResctrlGroup("koordlet-5db6", l3=((None, 0, 30),), pod="default/pod-1")


def test_resctrl_rdt_class_is_the_pod_group_and_asks_for_it() -> None:
    # The effect lets the server drop rdt_class if the group cannot be made.
    target = container_target(uid="5db6", annotations=RESCTRL)
    result = resctrl.container(target, Stage.CREATE_CONTAINER, rules())
    assert result is not None and result.resources.rdt_class == "koordlet-5db6"
    assert result.effects == (GROUP,)
    assert resctrl.container(container_target(), Stage.CREATE_CONTAINER, rules()) is None


def test_resctrl_pod_stage_creates_and_remove_stage_deletes_the_group() -> None:
    target = pod_target(uid="5db6", annotations=RESCTRL)
    created = resctrl.pod(target, rules())
    assert created is not None and created.effects == (GROUP,)
    removed = resctrl.remove_pod(target, rules())
    assert removed is not None
    assert removed.effects == (ResctrlGroupRemoval("koordlet-5db6", "default/pod-1"),)
    assert resctrl.remove_pod(pod_target(uid="5db6"), rules()) is None


def test_bad_resctrl_annotation_is_a_hook_error() -> None:
    target = container_target(annotations={"node.koordinator.sh/resctrl": '{"llc": 3}'})
    with pytest.raises(AnnotationError, match="llc: expected an object"):
        resctrl.container(target, Stage.CREATE_CONTAINER, rules())


def test_hostile_annotation_json_is_an_annotation_error() -> None:
    target = container_target(annotations={"node.koordinator.sh/resctrl": "[" * 100_000})
    with pytest.raises(AnnotationError, match="nested too deeply"):
        resctrl.container(target, Stage.CREATE_CONTAINER, rules())
