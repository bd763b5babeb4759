"""QoS classification (docs/koordinator.md#classification): koordinator class from a label, kube
class from cgroup parent."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from policy_server.policies.koordinator_qos.keys import LABEL_QOS_CLASS


class QOSClass(StrEnum):
    """Koordinator QoS; ``NONE`` for a missing or unknown label."""

    LSE = "LSE"
    LSR = "LSR"
    LS = "LS"
    BE = "BE"
    SYSTEM = "SYSTEM"
    NONE = ""


class KubeQOS(StrEnum):
    """Kubernetes pod QoS class."""

    GUARANTEED = "Guaranteed"
    BURSTABLE = "Burstable"
    BEST_EFFORT = "BestEffort"


_BY_LABEL = {q.value: q for q in QOSClass if q is not QOSClass.NONE}


def qos_class(labels: Mapping[str, str]) -> QOSClass:
    """Only the ``koordinator.sh/qosClass`` label counts; priority is never consulted."""
    return _BY_LABEL.get(labels.get(LABEL_QOS_CLASS, ""), QOSClass.NONE)


def kube_qos(cgroup_parent: str) -> KubeQOS:
    """In NRI mode koordlet infers the kube QoS from the pod's cgroup parent string."""
    if "besteffort" in cgroup_parent:
        return KubeQOS.BEST_EFFORT
    if "burstable" in cgroup_parent:
        return KubeQOS.BURSTABLE
    return KubeQOS.GUARANTEED


def default_qos(kube: KubeQOS) -> QOSClass:
    """qosmanager's default for an unlabeled pod (not used by the NRI hooks themselves)."""
    return {
        KubeQOS.GUARANTEED: QOSClass.LSR,
        KubeQOS.BURSTABLE: QOSClass.LS,
        KubeQOS.BEST_EFFORT: QOSClass.BE,
    }[kube]
