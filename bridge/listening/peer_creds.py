"""Who is at the other end of a Unix socket: SO_PEERCRED (and SO_PEERGROUPS), and the rule.

The kernel records the peer's pid, uid and gid when it connects; nothing the peer sends can
change them. `PeerRule` allows a peer whose uid is listed, or whose primary or supplementary
gid is. Read once per connection (bounded_protocol), checked once per request (http_guard).
"""

from __future__ import annotations

import os
import socket
import struct
from dataclasses import dataclass

from bridge import file_trust

SO_PEERGROUPS = getattr(socket, "SO_PEERGROUPS", 59)  # Linux >= 4.13
_MAX_GROUPS = 256


@dataclass(frozen=True, slots=True)
class PeerCreds:
    pid: int
    uid: int
    gid: int
    groups: frozenset[int] = frozenset()


def peer_creds(sock: socket.socket) -> PeerCreds | None:
    """The peer of a connected Unix socket; None for any other socket."""
    if sock.family != socket.AF_UNIX:
        return None
    pid, uid, gid = file_trust.peer_ucred(sock)
    groups: frozenset[int] = frozenset()
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, SO_PEERGROUPS, 4 * _MAX_GROUPS)
        groups = frozenset(struct.unpack(f"{len(raw) // 4}I", raw[: len(raw) // 4 * 4]))
    except OSError:
        pass  # an older kernel, or more groups than we ask for: the primary gid still counts
    return PeerCreds(pid, uid, gid, groups)


@dataclass(frozen=True, slots=True)
class PeerRule:
    """Peers allowed on a Unix socket: these uids, or members of these gids."""

    uids: frozenset[int]
    gids: frozenset[int]

    def allows(self, peer: PeerCreds) -> bool:
        return (peer.uid in self.uids or peer.gid in self.gids
                or not self.gids.isdisjoint(peer.groups))

    def describe(self) -> str:
        return f"uids {sorted(self.uids)}, gids {sorted(self.gids)}"


def default_rule(socket_path: str | None, uids: tuple[int, ...] | None,
                 gids: tuple[int, ...] | None) -> PeerRule:
    """Configured uids/gids, else root and the user we run as, and the socket file's group."""
    own = frozenset({0, os.geteuid()})
    socket_group: frozenset[int] = frozenset()
    if socket_path is not None:
        try:
            socket_group = frozenset({os.stat(socket_path).st_gid})
        except OSError:
            socket_group = frozenset({os.getegid()})
    return PeerRule(frozenset(uids) if uids is not None else own,
                    frozenset(gids) if gids is not None else socket_group)
