"""koordlet's arithmetic for a resctrl group's ``schemata`` file (docs/koordinator.md#resctrl).

Owns turning a ``ResctrlGroup`` request into schemata lines: the L3 cache bit mask for a
``[start%, end%)`` range of the cache ways, and the MBA value (Intel: percent rounded up to a
multiple of 10; AMD: 100% -> 2048, else ``int(160 * p / 100)``). Pure: the node's cache
geometry (CBM, cache ids) and CPU vendor are passed in by ``resctrl_fs``, which reads them.
"""

from __future__ import annotations

from collections.abc import Sequence

from policy_server.sdk.effects import ResctrlGroup

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
