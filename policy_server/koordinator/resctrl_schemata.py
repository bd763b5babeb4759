"""Resctrl requests and schemata (spec §4.7): the pod annotation -> group -> schemata lines.

Owns parsing ``node.koordinator.sh/resctrl`` into a ``ResctrlGroup`` effect and koordlet's
arithmetic for the group's ``schemata`` file: the L3 cache bit mask for a ``[start%, end%)``
range of the cache ways, and the MBA value (Intel: percent rounded up to a multiple of 10; AMD:
100% -> 2048, else ``int(160 * p / 100)``). Pure: the node's cache geometry (CBM, cache ids) and
CPU vendor are passed in by the executor that reads them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from policy_server.koordinator import keys
from policy_server.koordinator.annotations import AnnotationError
from policy_server.sdk import ResctrlGroup

INTEL_VENDOR_ID = "GenuineIntel"
AMD_VENDOR_ID = "AuthenticAMD"
# AMD CCD bandwidth: 25 GB/s * 8 * 0.8 (koordlet's AMDCCDMaxMBGbps), and the "unlimited" value.
AMD_MAX_MB_GBPS = 25 * 8 * 0.8
AMD_UNLIMITED_MB = 2048


def l3_mask(cbm: int, start_percent: int, end_percent: int) -> int:
    """The ways ``[ceil(ways*start/100), ceil(ways*end/100))`` of a cache with full mask ``cbm``.

    ``cbm`` must be all ones from bit 0 (the root group's mask); raises ``ValueError`` otherwise
    or for a range outside ``0 <= start < end <= 100``.
    """
    if cbm <= 0 or (cbm + 1) & cbm:
        raise ValueError(f"illegal cbm {cbm:#x} (not a contiguous mask from bit 0)")
    if start_percent < 0 or end_percent > 100 or end_percent <= start_percent:
        raise ValueError(f"illegal l3 cat percent: start {start_percent}, end {end_percent}")
    ways = cbm.bit_length()
    # Integer ceil of ways*p/100: the same as koordlet's float ceil for these small integers.
    start_way = -(-ways * start_percent // 100)
    end_way = -(-ways * end_percent // 100)
    return (1 << end_way) - (1 << start_way)


def mba_value(percent: int, vendor: str) -> int:
    """The MB schemata value for ``percent`` on this vendor (0 = vendor without MBA mapping)."""
    if vendor == INTEL_VENDOR_ID:
        return percent if percent % 10 == 0 else percent // 10 * 10 + 10
    if vendor == AMD_VENDOR_ID:
        return AMD_UNLIMITED_MB if percent == 100 else int(AMD_MAX_MB_GBPS * percent / 100)
    return 0


def schemata_lines(
    group: ResctrlGroup, cbm: int, cache_ids: Sequence[int], vendor: str
) -> tuple[str, ...]:
    """The lines to write into the group's ``schemata`` (``L3:0=ff;1=ff``, ``MB:0=50;1=50``).

    A part the pod did not ask for is left out, so the kernel keeps its default for it.
    Raises ``ValueError`` for a mask koordlet would refuse.
    """
    lines = []
    if group.l3:
        masks: dict[int, int] = {}
        for cache_id, start, end in group.l3:
            mask = l3_mask(cbm, start, end)
            for cid in cache_ids if cache_id is None else (cache_id,):
                masks[cid] = mask
        lines.append("L3:" + ";".join(f"{cid}={masks[cid]:x}" for cid in sorted(masks)))
    if group.mb:
        values: dict[int, int] = {}
        for cache_id, percent in group.mb:
            value = mba_value(percent, vendor)
            for cid in cache_ids if cache_id is None else (cache_id,):
                values[cid] = value
        if any(values.values()):
            lines.append("MB:" + ";".join(f"{cid}={values[cid]}" for cid in sorted(values)))
    return tuple(lines)


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
