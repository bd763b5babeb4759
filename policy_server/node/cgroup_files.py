"""Which cgroup v2 interface files a container's cgroup has on this node, probed once.

Owns ``container_cgroup_files`` and where kubelet keeps pod cgroups (``KUBEPODS``). runc sets a
container's ``unified`` keys by opening ``<container cgroup>/<key>``, so a key whose file the
node lacks fails the container's creation; ``NodeFacts.cgroup_files`` tells policies which keys
are safe.

Where to look. Not the root cgroup: it has none of the per-cgroup knobs (``cpu.weight``,
``cpu.max``, ``cpu.idle``, ``cpu.bvt_warp_ns``, ``memory.max``...). Not the server's own cgroup:
under a private cgroup namespace (containerd's default on v2) ``/proc/self/cgroup`` says
``0::/``, which names nothing in the host tree mounted at ``--cgroup-root``. The kubepods cgroup
(``kubepods.slice`` with the systemd driver, ``kubepods`` with cgroupfs) is the non-root
ancestor every pod and container cgroup shares: it has the files a non-root cgroup gets from
this kernel (a stock kernel has no ``cpu.bvt_warp_ns``) for the controllers the root enables.
Below it a cgroup has a controller's files only if its parent enables the controller
(``cgroup.subtree_control``); kubelet enables kubepods' controllers down to the containers, so
files of a controller kubepods has but does not pass on are left out (conservatively, by name
prefix). Must not write anything or raise: what cannot be read is "not known" (``None``).
"""

from __future__ import annotations

from pathlib import Path

# Where kubelet keeps pod cgroups under a hierarchy root: systemd driver, then cgroupfs.
KUBEPODS: tuple[str, ...] = ("kubepods.slice", "kubepods")


def container_cgroup_files(root: Path) -> frozenset[str] | None:
    """The interface files a container's cgroup has under the cgroup v2 ``root``, or None when
    there is no kubepods cgroup to look at (kubelet not running here) or it cannot be read."""
    for name in KUBEPODS:
        group = root / name
        if (group / "cgroup.controllers").is_file():
            return _files_below(group)
    return None


def _files_below(group: Path) -> frozenset[str] | None:
    try:
        names = [entry.name for entry in group.iterdir() if entry.is_file()]
        own = set((group / "cgroup.controllers").read_text().split())
        passed_on = set((group / "cgroup.subtree_control").read_text().split())
    except OSError:
        return None
    withheld = own - passed_on
    return frozenset(n for n in names if n.split(".", 1)[0] not in withheld)
