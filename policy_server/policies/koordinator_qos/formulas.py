"""Koordinator's shared resource formulas (docs/koordinator.md#formulas), as pure integer
functions."""

from __future__ import annotations

import math

from policy_server.policies.koordinator_qos.keys import (
    CFS_BASE_PERIOD_US,
    CFS_QUOTA_MIN_US,
    MAX_CPU_SHARES,
    MIN_CPU_SHARES,
    UNLIMITED,
)


def milli_cpu_to_shares(milli_cpu: int) -> int:
    """``mCPU * 1024 / 1000`` clamped to [2, 262144]; 2 for no CPU."""
    if milli_cpu <= 0:
        return MIN_CPU_SHARES
    return min(max(milli_cpu * 1024 // 1000, MIN_CPU_SHARES), MAX_CPU_SHARES)


def milli_cpu_to_quota(milli_cpu: int) -> int:
    """``mCPU * 100000 / 1000`` µs per base period; -1 (unlimited) for none, at least 1000."""
    quota = milli_cpu * CFS_BASE_PERIOD_US // 1000
    if quota <= 0:
        return UNLIMITED
    return max(quota, CFS_QUOTA_MIN_US)


def memory_limit(limit_bytes: int) -> int:
    """A memory limit in bytes; -1 (unlimited) for none."""
    return limit_bytes if limit_bytes > 0 else UNLIMITED


def scale_quota(quota: int, ratio: float | None) -> int:
    """Scale a CFS quota down by a CPU normalization ratio (only quota > 0 and ratio > 1)."""
    if ratio is None or quota <= 0 or ratio <= 1.0:
        return quota
    return math.ceil(quota / ratio)
