"""The policy server run on the host with the DaemonSet's identity for its container.

Owns: the shipped policy-server container's argv and identity taken from the rendered
manifests, re-pointed at private paths (socket, rules file, cgroup root), and started by PID
under ``setpriv`` with exactly that user, groups and capabilities.

Must not: invent arguments: every flag comes from the rendered manifest, only paths change.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests.deploy.support import BASE, Pod, render
from tests.e2e.policy_proc import PolicyServer

from .security_context import Identity, identity


class ShippedPolicyServer(PolicyServer):
    """``nri-policy-server`` with the rendered container's flags and securityContext."""

    def __init__(self, workdir: Path, cgroup_root: Path, overlay: Path = BASE,
                 as_identity: Identity | None = None) -> None:
        pod = Pod(render(overlay))
        self.shipped = pod
        self.identity = as_identity or identity(pod.spec, pod.policy)
        # Owned by the server's UID and closed to others (the file rule, docs/security.md#files:
        # a directory its group may write would be refused): it creates its socket there.
        workdir.mkdir(parents=True, exist_ok=True)
        os.chown(workdir, self.identity.uid, self.identity.gid)
        workdir.chmod(0o750)
        super().__init__(workdir)
        self.rules = workdir / "rules.yaml"
        self.rules.write_text(pod.file(pod.policy, str(pod.policy_args.rules)))
        self.cgroup_root = cgroup_root
        # As kubelet runs it: the settings ConfigMap's values expanded in the args.
        self.args = self._shipped_args(pod.policy_argv[1:])

    def _shipped_args(self, args: list[str]) -> list[str]:
        moved = {"--uds": str(self.socket), "--rules": str(self.rules),
                 "--cgroup-root": str(self.cgroup_root)}
        out: list[str] = []
        for arg in args:
            flag, eq, _ = arg.partition("=")
            if flag in ("--bridge-control", "--metrics-address"):
                continue  # no bridge, no TCP port here: neither is what these tests are about
            out.append(f"{flag}={moved[flag]}" if eq and flag in moved else arg)
        return out

    def command(self) -> list[str]:
        binary = str(Path(super().command()[0]))
        return [*self.identity.setpriv(), binary, *self.args, "--log-level", "info"]

    def state(self) -> dict[str, Any]:
        body: dict[str, Any] = self.get("/v1/state")["node_effects"]
        return body
