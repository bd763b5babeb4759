"""docs/koordinator.md#classification: QoS classification."""

from __future__ import annotations

import pytest

from policy_server.policies.koordinator_qos.qos import (
    KubeQOS,
    QOSClass,
    default_qos,
    kube_qos,
    qos_class,
)
from policy_server.sdk.cpu_list import check_cpu_list, parse_cpu_list


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({"koordinator.sh/qosClass": "LSE"}, QOSClass.LSE),
        ({"koordinator.sh/qosClass": "LSR"}, QOSClass.LSR),
        ({"koordinator.sh/qosClass": "LS"}, QOSClass.LS),
        ({"koordinator.sh/qosClass": "BE"}, QOSClass.BE),
        ({"koordinator.sh/qosClass": "SYSTEM"}, QOSClass.SYSTEM),
        ({"koordinator.sh/qosClass": "be"}, QOSClass.NONE),  # exact spelling only
        ({"koordinator.sh/qosClass": ""}, QOSClass.NONE),
        ({}, QOSClass.NONE),
        ({"koordinator.sh/priority-class": "koord-batch"}, QOSClass.NONE),  # priority ignored
    ],
)
def test_qos_class_from_label_only(labels: dict[str, str], expected: QOSClass) -> None:
    assert qos_class(labels) is expected


@pytest.mark.parametrize(
    ("parent", "expected"),
    [
        ("/kubepods/besteffort/pod1", KubeQOS.BEST_EFFORT),
        ("kubepods-besteffort-pod1.slice", KubeQOS.BEST_EFFORT),
        ("/kubepods/burstable/pod1", KubeQOS.BURSTABLE),
        ("kubepods-burstable-pod1.slice", KubeQOS.BURSTABLE),
        ("/kubepods/pod1", KubeQOS.GUARANTEED),
        ("", KubeQOS.GUARANTEED),
    ],
)
def test_kube_qos_from_cgroup_parent(parent: str, expected: KubeQOS) -> None:
    assert kube_qos(parent) is expected


def test_default_koord_qos_per_kube_qos() -> None:
    assert default_qos(KubeQOS.GUARANTEED) is QOSClass.LSR
    assert default_qos(KubeQOS.BURSTABLE) is QOSClass.LS
    assert default_qos(KubeQOS.BEST_EFFORT) is QOSClass.BE


def test_cpu_lists() -> None:
    assert parse_cpu_list("0-3,8,10-11") == {0, 1, 2, 3, 8, 10, 11}
    assert check_cpu_list(" 2-3 ") == "2-3"
    for bad in ["", "a", "3-1", "1,,2", "1-2-3", "-1"]:
        with pytest.raises(ValueError):
            check_cpu_list(bad)
