"""docker-compose.yml run with podman-compose next to a private containerd whose NRI directory
is mounted at the file's /var/run/nri and whose CRI socket at /run/containerd/containerd.sock.

Owns: the machine-wide lock this needs (the compose file names the host paths /var/run/nri and
/run/containerd, so only one such run at a time: flock on
/run/nri-webhook-bridge-shipped-compose.lock), binding the private containerd's NRI directory
onto /var/run/nri and its CRI socket onto /run/containerd/containerd.sock (and undoing both;
the directory /run/containerd itself stays as it is: the shims of every containerd on this
machine keep their sockets in /run/containerd/s), a private compose
project name, the work-arounds for this machine's podman (they live here, never in the shipped
file): the tmpfs sockets volume made beforehand without ``size=`` (podman 4.3 refuses it), the
image tagged as the file's ``image:`` (no build here: the session built it), health checks run
with ``podman healthcheck run`` (without systemd podman runs none by itself and ignores
``depends_on: service_healthy``), explicit rlimits via CONTAINERS_CONF.

Must not: edit docker-compose.yml, or touch /var/run/nri or /run/containerd without holding
the lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import yaml

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yml"
COMPOSE_BIN = Path(os.environ.get("NRI_SHIPPED_CACHE_DIR", "/var/cache/nri-webhook-bridge-shipped")
                   ) / "podman-compose-1.6.0" / "bin" / "podman-compose"
LOCK = Path("/run/nri-webhook-bridge-shipped-compose.lock")
NRI_DIR = Path("/var/run/nri")
CRI_SOCKET = Path("/run/containerd/containerd.sock")


@contextlib.contextmanager
def machine_lock() -> Iterator[None]:
    """The lock for /var/run/nri and /run/containerd/containerd.sock."""
    with LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@contextlib.contextmanager
def host_nri_dir(private: Path) -> Iterator[None]:
    """/var/run/nri is the private containerd's NRI directory for the duration (call with
    machine_lock held)."""
    made = not NRI_DIR.exists()
    if not made and any(NRI_DIR.iterdir()):
        raise AssertionError(f"{NRI_DIR} is in use on this machine (not empty); the compose "
                             "test needs it for its private containerd")
    NRI_DIR.mkdir(mode=0o700, exist_ok=True)
    subprocess.run(["mount", "--bind", str(private), str(NRI_DIR)], check=True)
    try:
        yield
    finally:
        subprocess.run(["umount", str(NRI_DIR)], check=False)
        if made:
            with contextlib.suppress(OSError):
                NRI_DIR.rmdir()


@contextlib.contextmanager
def host_cri_socket(private: Path) -> Iterator[None]:
    """/run/containerd/containerd.sock is the private containerd's socket for the duration (a
    bind mount of the socket file; call with machine_lock held). Only the file: the directory
    holds the shim sockets of every containerd on this machine."""
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISSOCK(CRI_SOCKET.lstat().st_mode):
            raise AssertionError(f"{CRI_SOCKET} is in use on this machine (a containerd); the "
                                 "compose test needs it for its private containerd")
    CRI_SOCKET.parent.mkdir(mode=0o711, exist_ok=True)
    CRI_SOCKET.touch(mode=0o600)
    subprocess.run(["mount", "--bind", str(private), str(CRI_SOCKET)], check=True)
    try:
        yield
    finally:
        subprocess.run(["umount", str(CRI_SOCKET)], check=False)
        with contextlib.suppress(OSError):
            CRI_SOCKET.unlink()


class ComposeProject:
    """One ``podman-compose -p NAME`` project of docker-compose.yml."""

    def __init__(self, image_ref: str, containers_conf: Path, log: IO[str]) -> None:
        self.name = f"nri-shp-{uuid.uuid4().hex[:8]}"
        self.image_ref = image_ref
        self.env = dict(os.environ, CONTAINERS_CONF=str(containers_conf))
        self.file: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text())
        self.log = log

    def run(self, *args: str, check: bool = True) -> str:
        done = subprocess.run(list(args), capture_output=True, text=True, env=self.env,
                              cwd=REPO, timeout=300, check=False)  # fmt: skip
        self.log.write(f"$ {' '.join(args)}\n{done.stdout}{done.stderr}\n")
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(args)}: exit {done.returncode}\n"
                                 f"{done.stdout}{done.stderr}")
        return done.stdout

    def compose(self, *args: str) -> str:
        return self.run(str(COMPOSE_BIN), "-f", str(COMPOSE_FILE), "-p", self.name, *args)

    def prepare(self) -> None:
        images = {s["image"] for s in self.file["services"].values()}
        for image in images:
            self.run("podman", "tag", self.image_ref, image)
        for name, spec in self.file.get("volumes", {}).items():
            opts = dict(spec.get("driver_opts", {}))
            # podman 4.3 refuses tmpfs size= on a local volume; everything else as declared.
            opts["o"] = ",".join(o for o in opts.get("o", "").split(",")
                                 if o and not o.startswith("size="))
            args = ["podman", "volume", "create", "--driver", spec.get("driver", "local")]
            for key, value in opts.items():
                args += ["--opt", f"{key}={value}"]
            self.run(*args, f"{self.name}_{name}")

    def up(self) -> None:
        self.compose("up", "-d", "--no-build")

    def container(self, service: str) -> str:
        out = self.run("podman", "ps", "-a", "--filter", f"label=io.podman.compose.project="
                       f"{self.name}", "--filter", f"label=com.docker.compose.service={service}",
                       "--format", "{{.Names}}").split()  # fmt: skip
        assert len(out) == 1, f"expected one container for {service}, got {out}"
        return out[0]

    def state(self, service: str) -> str:
        return self.run("podman", "inspect", "--format", "{{.State.Status}}",
                        self.container(service)).strip()

    def pid(self, service: str) -> int:
        return int(self.run("podman", "inspect", "--format", "{{.State.Pid}}",
                            self.container(service)).strip())

    def healthy(self, service: str) -> bool:
        done = subprocess.run(["podman", "healthcheck", "run", self.container(service)],
                              capture_output=True, text=True, env=self.env, check=False)
        return done.returncode == 0

    def logs(self, service: str) -> str:
        """The container's output: stdout and stderr (where both programs log), which
        ``podman logs`` replays on its own stdout and stderr."""
        done = subprocess.run(["podman", "logs", self.container(service)], capture_output=True,
                              text=True, env=self.env, timeout=60, check=False)
        return done.stdout + done.stderr

    def down(self) -> None:
        """Stop and remove the project's containers and volumes. Never raises."""
        with contextlib.suppress(Exception):
            self.compose("down", "-v", "-t", "10")
        for name in self.file.get("volumes", {}):
            with contextlib.suppress(Exception):
                self.run("podman", "volume", "rm", "-f", f"{self.name}_{name}", check=False)
        for image in {s["image"] for s in self.file["services"].values()}:
            with contextlib.suppress(Exception):
                self.run("podman", "rmi", image, check=False)  # the tag only: it has others
