"""A Kubernetes container securityContext, applied to a host process as the kubelet would.

Owns: turning the rendered pod's ``securityContext`` (runAsUser, runAsGroup, fsGroup,
capabilities drop/add, allowPrivilegeEscalation) into a ``setpriv`` prefix, and reading a
running process's identity back from /proc so a test can show it is exactly that.

Must not: start processes itself or know what the program under it does.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Bit numbers of the capabilities a shipped manifest may add (linux/capability.h).
CAP_BITS = {"DAC_OVERRIDE": 1, "KILL": 5, "SYS_NICE": 23, "SYS_RESOURCE": 24, "SYS_ADMIN": 21,
            "SYS_PTRACE": 19, "CHOWN": 0, "FOWNER": 3, "SETUID": 7, "SETGID": 6}  # fmt: skip
# The runtime's default set (containerd/runc), what "not dropped" would mean.
ALL = "ALL"


@dataclass(frozen=True, slots=True)
class Identity:
    uid: int
    gid: int
    groups: tuple[int, ...]
    added: tuple[str, ...]  # capabilities left after drop ALL (names without CAP_)
    no_new_privs: bool

    def cap_mask(self) -> int:
        mask = 0
        for name in self.added:
            mask |= 1 << CAP_BITS[name]
        return mask

    def setpriv(self) -> list[str]:
        """``setpriv`` options that make a root shell's child this identity."""
        bounding = "-all" + "".join(f",+{n.lower()}" for n in self.added)
        argv = ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}"]
        argv.append("--groups=" + ",".join(map(str, self.groups)) if self.groups
                    else "--clear-groups")
        argv += ["--inh-caps=-all", "--ambient-caps=-all", f"--bounding-set={bounding}"]
        if self.no_new_privs:
            argv.append("--no-new-privs")
        return [*argv, "--"]


def identity(pod_spec: dict[str, Any], container: dict[str, Any]) -> Identity:
    """The identity kubelet gives ``container`` of ``pod_spec`` (rendered manifests)."""
    pod_ctx = pod_spec.get("securityContext", {})
    ctx = container.get("securityContext", {})
    caps = ctx.get("capabilities", {})
    assert caps.get("drop") == [ALL], (
        f"container {container['name']}: this harness applies drop: [ALL] plus adds only, "
        f"not {caps}")
    assert not ctx.get("privileged", False), f"container {container['name']} is privileged"
    uid = int(ctx.get("runAsUser", pod_ctx.get("runAsUser", 0)))
    gid = int(ctx.get("runAsGroup", pod_ctx.get("runAsGroup", 0)))
    groups = tuple(int(g) for g in pod_ctx.get("supplementalGroups", []))
    if "fsGroup" in pod_ctx:
        groups = (*groups, int(pod_ctx["fsGroup"]))
    return Identity(uid=uid, gid=gid, groups=groups,
                    added=tuple(str(c).removeprefix("CAP_") for c in caps.get("add", [])),
                    no_new_privs=ctx.get("allowPrivilegeEscalation") is False)


@dataclass(frozen=True, slots=True)
class ProcIdentity:
    uids: tuple[int, ...]
    gids: tuple[int, ...]
    groups: tuple[int, ...]
    cap_eff: int
    cap_prm: int
    cap_bnd: int
    cap_amb: int
    no_new_privs: bool


def read_proc(pid: int) -> ProcIdentity:
    fields: dict[str, str] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return ProcIdentity(
        uids=tuple(int(v) for v in fields["Uid"].split()),
        gids=tuple(int(v) for v in fields["Gid"].split()),
        groups=tuple(sorted(int(v) for v in fields["Groups"].split())),
        cap_eff=int(fields["CapEff"], 16),
        cap_prm=int(fields["CapPrm"], 16),
        cap_bnd=int(fields["CapBnd"], 16),
        cap_amb=int(fields["CapAmb"], 16),
        no_new_privs=fields.get("NoNewPrivs") == "1",
    )


def assert_is(pid: int, want: Identity) -> None:
    """The running process ``pid`` has exactly the identity ``want``."""
    got = read_proc(pid)
    assert got.uids == (want.uid,) * 4, f"uids {got.uids}, want {want.uid}"
    assert got.gids == (want.gid,) * 4, f"gids {got.gids}, want {want.gid}"
    assert got.groups == tuple(sorted(want.groups)), f"groups {got.groups}, want {want.groups}"
    # Root gets the bounding set as its capabilities at execve; anyone else gets none. Nothing
    # can add what this machine's own bounding set lacks (here: SYS_RESOURCE), as for runc.
    mask = want.cap_mask() & read_proc(os.getpid()).cap_bnd if want.uid == 0 else 0
    assert (got.cap_eff, got.cap_prm, got.cap_bnd, got.cap_amb) == (mask, mask, mask, 0), got
    assert got.no_new_privs == want.no_new_privs, got
