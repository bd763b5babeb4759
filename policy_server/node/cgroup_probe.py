"""Whether the pod cgroup files pod-level writes open can be written here, found out once.

Owns ``unwritable`` and the files it looks at. Not the hierarchy's directory (cgroupfs makes it
0555 and a pod-level write never creates anything there): the files themselves, on a
read-write mount. Must not write anything.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from policy_server.node.cgroup_files import KUBEPODS

# What the probe checks: the files pod-level writes really open (v1: per controller hierarchy),
# looked up where kubelet keeps pod cgroups first, then at the hierarchy's root.
PROBE_FILES_V1: dict[str, tuple[str, ...]] = {
    "cpu": ("cpu.cfs_quota_us", "cpu.shares"),
    "memory": ("memory.limit_in_bytes",),
}
PROBE_FILES_V2: tuple[str, ...] = ("cpu.max", "cpu.weight", "memory.max")


def unwritable(hierarchy: Path, files: Sequence[str]) -> str:
    """Why pod cgroup files under ``hierarchy`` cannot be written ("" if they can).

    What a write needs is the file itself (root-owned 0644 on cgroupfs, so UID 0 with every
    capability dropped may write it as its owner) on a read-write mount. ``os.access`` checks
    with the caller's real UID and permitted capabilities, as the write will.
    """
    if not hierarchy.is_dir():
        return f"no cgroup hierarchy at {hierarchy}"
    try:
        if os.statvfs(hierarchy).f_flag & os.ST_RDONLY:
            return f"{hierarchy} is mounted read-only"
    except OSError as exc:
        return f"{hierarchy}: {exc.strerror}"
    places = [hierarchy / k for k in KUBEPODS if (hierarchy / k).is_dir()] + [hierarchy]
    for place in places:
        for name in files:
            sample = place / name
            if sample.is_file():
                if os.access(sample, os.W_OK):
                    return ""
                return (
                    f"{sample} is not writable by uid {os.getuid()} (pod cgroup files are "
                    "root-owned: run as UID 0)"
                )
    # No such file yet (e.g. cgroup v2 before kubelet made kubepods): the first write says why.
    return ""
