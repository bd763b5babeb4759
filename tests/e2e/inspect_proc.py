"""Read what the kernel says about a running container process.

Owns: the container's environment (``/proc/<pid>/environ``) and its cgroup v1 values
(``cpu.shares``, ``cpuset.cpus``, ``memory.limit_in_bytes``), found through
``/proc/<pid>/cgroup`` so the test reads the cgroup the process really lives in.

Must not: write anything; these are the facts the tests assert on.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.waiting import wait_until

CGROUP_V1_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True, slots=True)
class CgroupValues:
    """The cgroup v1 values an NRI adjustment can change, plus where they were read."""

    cpu_path: str  # the process's path in the cpu hierarchy, e.g. /nri-e2e-<run id>/pod<uid>/<id>
    cpu_shares: int
    cpuset_cpus: str
    memory_limit_bytes: int


def environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(): v.decode() for k, v in pairs}


def environ_after_exec(pid: int, comm: str = "sleep", timeout_s: float = 5.0) -> dict[str, str]:
    """The environment once the process runs ``comm`` (the containers ``exec sleep``).

    Read too early, ``/proc/<pid>/environ`` belongs to the shell or is empty: during an
    execve the new mm has no environment range yet, and the kernel returns 0 bytes.
    """
    def running() -> str:
        try:
            return Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            return "<gone>"

    def env_of_comm() -> dict[str, str] | None:
        return environ(pid) if running() == comm else None  # {} while the exec is under way

    return wait_until(env_of_comm, what=f"pid {pid} runs {comm!r} with an environment",
                      timeout_s=timeout_s, interval_s=0.02,
                      details=lambda: f"pid {pid} runs {running()!r}")


def cgroup_paths(pid: int) -> dict[str, str]:
    """controller -> path, from /proc/<pid>/cgroup (v1 lines: id:ctrl1,ctrl2:path)."""
    paths: dict[str, str] = {}
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(","):
            if controller:
                paths[controller] = path
    return paths


def _read(controller: str, path: str, name: str) -> str:
    return (CGROUP_V1_ROOT / controller / path.lstrip("/") / name).read_text().strip()


def cgroup_file(pid: int, controller: str, name: str) -> str:
    """One cgroup v1 file of the process, e.g. ``cgroup_file(pid, "cpu", "cpu.cfs_quota_us")``."""
    paths = cgroup_paths(pid)
    if controller not in paths:
        raise AssertionError(f"pid {pid} has no cgroup v1 path for {controller}: {paths}")
    return _read(controller, paths[controller], name)


def cgroup_values(pid: int) -> CgroupValues:
    if (CGROUP_V1_ROOT / "cgroup.controllers").exists():
        return _cgroup_v2_values(pid)
    paths = cgroup_paths(pid)
    missing = {"cpu", "cpuset", "memory"} - paths.keys()
    if missing:
        raise AssertionError(f"pid {pid} has no cgroup v1 path for {sorted(missing)}: {paths}")
    return CgroupValues(
        cpu_path=paths["cpu"],
        cpu_shares=int(_read("cpu", paths["cpu"], "cpu.shares")),
        cpuset_cpus=_read("cpuset", paths["cpuset"], "cpuset.cpus"),
        memory_limit_bytes=int(_read("memory", paths["memory"], "memory.limit_in_bytes")),
    )


def _cgroup_v2_values(pid: int) -> CgroupValues:
    """The same values on a cgroup v2 node (the `make node-v2` guest). ``cpu.weight`` is no
    shares value (which conversion made it depends on the runtime), so ``cpu_shares`` is -1
    there: v2 tests read ``cpu.weight`` themselves (tests/node_v2/guest_node.py)."""
    lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    path = next((line[3:] for line in lines if line.startswith("0::")), None)
    if path is None:
        raise AssertionError(f"pid {pid} has no cgroup v2 line in /proc/{pid}/cgroup: {lines}")
    directory = CGROUP_V1_ROOT / path.lstrip("/")
    memory = (directory / "memory.max").read_text().strip()
    return CgroupValues(
        cpu_path=path,
        cpu_shares=-1,
        cpuset_cpus=(directory / "cpuset.cpus").read_text().strip(),
        memory_limit_bytes=-1 if memory == "max" else int(memory),
    )
