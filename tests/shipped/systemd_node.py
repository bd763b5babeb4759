"""A Debian node with systemd as PID 1 in a podman container, running containerd and both units.

Owns: building the node image (tests/shipped/setup/build-systemd-node.sh: the project installed
by running docs/deployment.md's systemd block), starting it privileged with a private name and
private host directories, giving it containerd 1.7.24 as ``containerd.service`` (this machine's
binaries, mounted read-only; NRI from the shipped deploy/runtime/containerd-1.7.toml), the e2e
images, and stopping and removing it (and the cgroups its pods left) by its name.

Must not: change the shipped units or their config. The containerd unit and main config are
this harness's own: they stand for the node's runtime, which the project does not ship.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

from tests.e2e.cgroup_scope import KUBEPODS
from tests.e2e.runtimes import IMAGE_TARBALLS, PAUSE_IMAGE, RUNC
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "tests" / "shipped" / "setup" / "build-systemd-node.sh"
NRI_SNIPPET = REPO / "deploy" / "runtime" / "containerd-1.7.toml"
UNITS = ("nri-policy-server.service", "nri-webhook-bridge.service")
CONTAINERD_BINARIES = ("containerd", "containerd-shim-runc-v2", "ctr")
BOOT_TIMEOUT_S = 120.0
CGROUP_V1_ROOT = Path("/sys/fs/cgroup")

CONTAINERD_UNIT = """[Unit]
Description=containerd (the node's runtime, for the as-shipped systemd test)
After=local-fs.target

[Service]
ExecStart=/usr/local/bin/containerd
Type=notify
Delegate=yes
KillMode=process
Restart=always

[Install]
WantedBy=multi-user.target
"""

CONTAINERD_CONFIG = f"""version = 2
imports = ["/etc/containerd/conf.d/*.toml"]

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  disable_tcp_service = true
  # This machine's bounding set has no CAP_SYS_RESOURCE: no OOM score below the current one.
  restrict_oom_score_adj = true

[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  BinaryName = "/usr/local/bin/runc"
  SystemdCgroup = false
"""


def build() -> str:
    done = subprocess.run(["bash", str(BUILD)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"systemd node image build failed:\n{done.stderr[-4000:]}"
    return done.stdout.strip()


class SystemdNode:
    """One running node container (``podman run --systemd=always``)."""

    def __init__(self, image: str, containers_conf: Path) -> None:
        self.image = image
        self.name = f"nri-shipped-node-{uuid.uuid4().hex[:10]}"
        self.dir = Path(tempfile.mkdtemp(prefix="nri-sdnode-", dir="/tmp"))
        self.env = dict(os.environ, CONTAINERS_CONF=str(containers_conf))
        self.cgroup: str | None = None  # the container's cgroup path (cpu hierarchy)
        # Pod cgroups of this node's containerd: private, beneath the host's /kubepods (the
        # shipped policy server, kubelet's default cgroup root, writes nowhere else).
        self.pod_prefix = f"{KUBEPODS}/{self.name}"

    @property
    def cri_socket(self) -> Path:
        return self.dir / "run-containerd" / "containerd.sock"

    def podman(self, *args: str, check: bool = True, timeout: float = 120) -> str:
        done = subprocess.run(["podman", *args], capture_output=True, text=True,
                              env=self.env, timeout=timeout, check=False)  # fmt: skip
        if check and done.returncode != 0:
            raise AssertionError(f"podman {' '.join(args)}: exit {done.returncode}\n"
                                 f"{done.stdout}{done.stderr}")
        return done.stdout

    def exec(self, *cmd: str, check: bool = True) -> str:
        return self.podman("exec", self.name, *cmd, check=check)

    def start(self) -> None:
        etc = self.dir / "etc-containerd"
        (etc / "conf.d").mkdir(parents=True)
        (etc / "config.toml").write_text(CONTAINERD_CONFIG)
        shutil.copyfile(NRI_SNIPPET, etc / "conf.d" / "nri.toml")
        unit = self.dir / "containerd.service"
        unit.write_text(CONTAINERD_UNIT)
        for sub in ("lib-containerd", "run-containerd"):
            (self.dir / sub).mkdir()
        mounts = [f"{etc}:/etc/containerd:ro", f"{unit}:/etc/systemd/system/containerd.service:ro",
                  f"{self.dir / 'lib-containerd'}:/var/lib/containerd",
                  f"{self.dir / 'run-containerd'}:/run/containerd",
                  f"{IMAGE_TARBALLS[0].parent}:/images:ro",
                  f"{RUNC}:/usr/local/bin/runc:ro"]  # fmt: skip
        mounts += [f"/usr/bin/{b}:/usr/local/bin/{b}:ro" for b in CONTAINERD_BINARIES]
        # The host's cgroup tree and namespace, as a node has them: the policy server's writes
        # and runc's pod cgroups meet at the same paths (a private cgroup view would make
        # NRI's cgroup parents and the mounted tree disagree).
        mounts.append("/sys/fs/cgroup:/sys/fs/cgroup:rw")
        args = ["run", "-d", "--name", self.name, "--privileged", "--systemd=always",
                "--cgroupns=host", "--network", "none"]  # fmt: skip
        for m in mounts:
            args += ["-v", m]
        self.podman(*args, self.image)
        pid = self.podman("inspect", "--format", "{{.State.Pid}}", self.name).strip()
        for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if "cpu" in controllers.split(","):
                self.cgroup = path
        # Booted: every unit started (or failed, which is-system-running says as "degraded").
        # Until PID 1 has its bus up, systemctl cannot ask it (and prints nothing).
        def booted() -> bool:
            done = subprocess.run(["podman", "exec", self.name, "systemctl", "is-system-running",
                                   "--wait"], capture_output=True, text=True, env=self.env,
                                  timeout=BOOT_TIMEOUT_S, check=False)  # fmt: skip
            last[:] = [done.stdout.strip(), done.stderr.strip()]
            return last[0] in ("running", "degraded")
        last: list[str] = []
        wait_until(booted, what="systemd boots", timeout_s=BOOT_TIMEOUT_S, interval_s=0.2,
                   details=lambda: f"is-system-running: {last}")
        self.exec("systemctl", "enable", "--now", "containerd.service")
        wait_until(self.cri_socket.exists, what="containerd's CRI socket appears",
                   timeout_s=BOOT_TIMEOUT_S, interval_s=0.1,
                   details=lambda: self.journal("containerd.service"))
        for tarball in IMAGE_TARBALLS:
            self.exec("ctr", "-n", "k8s.io", "images", "import", f"/images/{tarball.name}")

    def journal(self, unit: str) -> str:
        return self.exec("journalctl", "--no-pager", "-o", "cat", "-u", unit, check=False)

    def is_active(self, unit: str) -> str:
        return self.exec("systemctl", "is-active", unit, check=False).strip()

    def pod_cgroup(self, controller: str, uid: str) -> Path:
        return CGROUP_V1_ROOT / controller / self.pod_prefix / f"pod{uid}"

    def stop(self) -> None:
        """Remove the node container by name, then its private directory. Never raises."""
        with contextlib.suppress(Exception):
            self.podman("rm", "--force", "--time", "10", self.name, check=False)
        tops = [self.pod_prefix] + ([self.cgroup.lstrip("/")] if self.cgroup else [])
        for top_name in tops:
            for hierarchy in CGROUP_V1_ROOT.iterdir():
                top = hierarchy / top_name
                if not top.is_dir():
                    continue
                for d in sorted((p for p in top.rglob("*") if p.is_dir()),
                                key=lambda p: -len(p.parts)):
                    with contextlib.suppress(OSError):
                        d.rmdir()
                with contextlib.suppress(OSError):
                    top.rmdir()
        shutil.rmtree(self.dir, ignore_errors=True)
