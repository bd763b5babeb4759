"""The containerd versions under test and their private configuration files.

Owns: where each containerd's binaries live (installed by setup/install-runtimes.sh),
the private directory layout of one test instance, and rendering its config.toml
(``version = 2`` for 1.7, ``version = 3`` for 2.x, whose CRI keys moved) without NRI: the
NRI part is what ``nri-webhook-bridge runtime-config --write`` adds (``runtime_config_args``;
containerd.py runs the command, ``render_config`` applies the same change in-process).

Must not: start processes (see containerd.py) or touch system-wide paths: everything a
test instance writes lives under its private base directory.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

CACHE_DIR = Path(os.environ.get("NRI_E2E_CACHE_DIR", "/var/cache/nri-webhook-bridge-e2e"))
IMAGES_DIR = CACHE_DIR / "images"
PAUSE_IMAGE = "localhost/nri-e2e/pause:1.0"
BUSYBOX_IMAGE = "localhost/nri-e2e/busybox:1.0"
IMAGE_TARBALLS = (IMAGES_DIR / "pause.tar", IMAGES_DIR / "busybox.tar")
RUNC = Path("/usr/bin/runc")
# Default NRI request timeout; kept as is so the "never dropped for slowness" test is real.
NRI_REQUEST_TIMEOUT_S = 2


@dataclass(frozen=True, slots=True)
class Runtime:
    """One containerd build under test."""

    version: str
    bin_dir: Path  # holds containerd, ctr and containerd-shim-runc-v2
    config_version: int
    # The NRI module version vendored in this build (docs/protocol.md#configure-and-the-event-mask).
    nri_version: str
    # The cgroup driver (systemd: pod cgroups are slices, containers cri-containerd-<id>.scope).
    systemd_cgroup: bool = False
    runc: Path = RUNC
    # NRI's request timeout. The default 2 s is kept on a host, so the "never dropped for
    # slowness" test is real; the emulated v2 guest sizes it for emulation.
    nri_request_timeout_s: int = NRI_REQUEST_TIMEOUT_S

    @property
    def containerd(self) -> Path:
        return self.bin_dir / "containerd"

    @property
    def ctr(self) -> Path:
        return self.bin_dir / "ctr"


RUNTIMES = (
    Runtime("1.7.24", Path("/usr/bin"), 2, "v0.6.1"),
    Runtime("2.1.9", CACHE_DIR / "containerd-2.1.9" / "usr" / "bin", 3, "v0.8.0"),
)


@dataclass(frozen=True, slots=True)
class InstanceDirs:
    """The private paths of one containerd instance (all under ``base``)."""

    base: Path

    @property
    def root(self) -> Path:
        return self.base / "root"

    @property
    def state(self) -> Path:
        return self.base / "state"

    @property
    def address(self) -> Path:
        return self.base / "containerd.sock"

    @property
    def nri_socket(self) -> Path:
        return self.base / "nri" / "nri.sock"

    @property
    def config(self) -> Path:
        return self.base / "config.toml"

    @property
    def log(self) -> Path:
        return self.base / "containerd.log"

    def subdir(self, name: str) -> Path:
        return self.base / name

    def create(self) -> None:
        for name in ("root", "state", "nri-plugins", "nri-conf", "opt", "cni-bin", "cni-conf",
                     "cdi"):
            self.subdir(name).mkdir(parents=True, exist_ok=True)


def _q(value: str | Path) -> str:
    """A TOML basic string (JSON string escapes are valid TOML escapes)."""
    return json.dumps(str(value))


def runtime_config_args(runtime: Runtime, dirs: InstanceDirs) -> list[str]:
    """`nri-webhook-bridge runtime-config` arguments that turn NRI on in this instance's file."""
    return [
        "runtime-config", "--runtime", "containerd", "--runtime-version", runtime.version,
        "--file", str(dirs.config), "--write",
        "--socket-path", str(dirs.nri_socket),
        "--plugin-path", str(dirs.subdir("nri-plugins")),
        "--plugin-config-path", str(dirs.subdir("nri-conf")),
        "--registration-timeout", f"{max(5, 2 * runtime.nri_request_timeout_s)}s",
        "--request-timeout", f"{runtime.nri_request_timeout_s}s",
    ]


def _header(runtime: Runtime, dirs: InstanceDirs) -> str:
    return f"""version = {runtime.config_version}
root = {_q(dirs.root)}
state = {_q(dirs.state)}

[grpc]
  address = {_q(dirs.address)}
"""


def _runc_options(runtime: Runtime, dirs: InstanceDirs) -> str:
    # The runtime's cgroup driver and runc build, and a private runc state root.
    return f"""  BinaryName = {_q(runtime.runc)}
  Root = {_q(dirs.subdir("runc"))}
  SystemdCgroup = {"true" if runtime.systemd_cgroup else "false"}
"""


def render_config_v2(runtime: Runtime, dirs: InstanceDirs) -> str:
    """containerd 1.7: everything CRI lives under io.containerd.grpc.v1.cri."""
    cri = '"io.containerd.grpc.v1.cri"'
    return (
        _header(runtime, dirs)
        + f"""
[plugins.{cri}]
  sandbox_image = {_q(PAUSE_IMAGE)}
  restrict_oom_score_adj = true
  disable_tcp_service = true

[plugins.{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[plugins.{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins.{cri}.containerd.runtimes.runc.options]
{_runc_options(runtime, dirs)}
[plugins.{cri}.cni]
  bin_dir = {_q(dirs.subdir("cni-bin"))}
  conf_dir = {_q(dirs.subdir("cni-conf"))}

[plugins."io.containerd.internal.v1.opt"]
  path = {_q(dirs.subdir("opt"))}
"""
    )


def render_config_v3(runtime: Runtime, dirs: InstanceDirs) -> str:
    """containerd 2.x: CRI split into cri.v1.images / cri.v1.runtime / grpc.v1.cri."""
    images = "'io.containerd.cri.v1.images'"
    rt = "'io.containerd.cri.v1.runtime'"
    return (
        _header(runtime, dirs)
        + f"""
[plugins.{images}]
  snapshotter = "overlayfs"

[plugins.{images}.pinned_images]
  sandbox = {_q(PAUSE_IMAGE)}

[plugins.{rt}]
  restrict_oom_score_adj = true
  # CDI specs from a private directory (the device-injector e2e writes one).
  enable_cdi = true
  cdi_spec_dirs = [{_q(dirs.subdir("cdi"))}]

[plugins.{rt}.containerd]
  default_runtime_name = "runc"

[plugins.{rt}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins.{rt}.containerd.runtimes.runc.options]
{_runc_options(runtime, dirs)}
[plugins.{rt}.cni]
  bin_dirs = [{_q(dirs.subdir("cni-bin"))}]
  conf_dir = {_q(dirs.subdir("cni-conf"))}

[plugins.'io.containerd.grpc.v1.cri']
  disable_tcp_service = true

[plugins.'io.containerd.internal.v1.opt']
  path = {_q(dirs.subdir("opt"))}
"""
    )


def render_base_config(runtime: Runtime, dirs: InstanceDirs) -> str:
    """The instance's config.toml before NRI is turned on."""
    if runtime.config_version == 2:
        return render_config_v2(runtime, dirs)
    return render_config_v3(runtime, dirs)


def render_config(runtime: Runtime, dirs: InstanceDirs) -> str:
    """The config.toml containerd starts from: the base plus what `runtime-config` adds
    (in-process; containerd.py runs the command itself)."""
    from bridge.cli import build_bridge_parser
    from bridge.runtime_config import runtime_config_command

    args = build_bridge_parser("runtime-config").parse_args(runtime_config_args(runtime, dirs))
    result, _ = runtime_config_command.requested_change(args, render_base_config(runtime, dirs))
    return result.text
