"""Resctrl requests (docs/koordinator.md#resctrl): the pod annotation -> ``ResctrlGroup``.

Owns parsing ``node.koordinator.sh/resctrl`` into a ``ResctrlGroup`` effect (the request in
percent); the node executor turns it into schemata lines with the node's cache geometry
(``policy_server.node.resctrl_masks``). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policy_server.policies.koordinator_qos import keys
from policy_server.policies.koordinator_qos.annotations import AnnotationError
from policy_server.sdk import ResctrlGroup


def group_name(pod_uid: str) -> str:
    return f"{keys.RESCTRL_GROUP_PREFIX}{pod_uid}"


def _percent(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise AnnotationError(keys.ANNOTATION_RESCTRL, f"{where}: expected an integer percent")
    return value


def _range(value: object, where: str) -> tuple[int, int] | None:
    # koordlet only uses a range of exactly two numbers and ignores anything else.
    if not isinstance(value, list) or len(value) != 2:
        return None
    return _percent(value[0], where), _percent(value[1], where)


def _cache_id(item: Mapping[str, Any], where: str) -> int:
    value = item.get("cacheID", 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise AnnotationError(keys.ANNOTATION_RESCTRL, f"{where}.cacheID: expected an integer")
    return value


def _objects(value: object, where: str) -> list[Mapping[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise AnnotationError(keys.ANNOTATION_RESCTRL, f"{where}: expected a list of objects")
    return value


def _section(parent: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = parent.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise AnnotationError(keys.ANNOTATION_RESCTRL, f"{where}: expected an object")
    return value


def resctrl_group(config: Mapping[str, Any], pod_uid: str, pod_label: str) -> ResctrlGroup:
    """The group a pod's parsed ``node.koordinator.sh/resctrl`` asks for."""
    llc = _section(config, "llc", "llc")
    mb = _section(config, "mb", "mb")
    l3: list[tuple[int | None, int, int]] = []
    whole = _range(_section(llc, "schemata", "llc.schemata").get("range"), "llc.schemata.range")
    if whole is not None:
        l3.append((None, *whole))
    for i, item in enumerate(_objects(llc.get("schemataPerCache"), "llc.schemataPerCache")):
        where = f"llc.schemataPerCache[{i}]"
        per = _range(item.get("range"), f"{where}.range")
        if per is not None:
            l3.append((_cache_id(item, where), *per))
    bandwidth: list[tuple[int | None, int]] = []
    percent = _section(mb, "schemata", "mb.schemata").get("percent", 0)
    if _percent(percent, "mb.schemata.percent") != 0:
        bandwidth.append((None, percent))
    for i, item in enumerate(_objects(mb.get("schemataPerCache"), "mb.schemataPerCache")):
        where = f"mb.schemataPerCache[{i}]"
        bandwidth.append((_cache_id(item, where), _percent(item.get("percent", 0), where)))
    return ResctrlGroup(group_name(pod_uid), tuple(l3), tuple(bandwidth), pod_label)
