"""nginx/fetch.sh trusts a cached binary only if it runs, and fetches the machine's own release.

Every run uses a private build directory (``NGINX_BUILD``), never the checkout's
``tests/servers/nginx/.build`` that the conformance matrix uses. The fetch is real: apt's lists
and the Debian mirror, as ``make tools`` uses them.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.processes  # starts processes: not in make check

HERE = Path(__file__).resolve().parent
FETCH = HERE / "nginx" / "fetch.sh"
FETCH_TIMEOUT_S = 300.0


def machine_release() -> str:
    for line in Path("/etc/os-release").read_text().splitlines():
        if line.startswith("VERSION_CODENAME="):
            return line.split("=", 1)[1].strip('"')
    return ""


def release_versions(release: str) -> set[str]:
    """nginx versions apt offers from ``release``'s own suites (release, release-security, ...)."""
    done = subprocess.run(["apt-cache", "madison", "nginx"], capture_output=True, text=True,
                          check=False)
    versions = set()
    for line in done.stdout.splitlines():
        fields = line.split()
        suite = fields[5].split("/")[0] if len(fields) > 5 else ""
        if suite == release or suite.startswith(release + "-"):
            versions.add(fields[2])
    return versions


def fetch(build: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(FETCH)], env={**os.environ, "NGINX_BUILD": str(build)},
                          capture_output=True, text=True, timeout=FETCH_TIMEOUT_S, check=False)


def deb_version(deb: Path) -> str:
    return subprocess.run(["dpkg-deb", "-f", str(deb), "Version"], capture_output=True,
                          text=True, check=True).stdout.strip()


@pytest.fixture(scope="module")
def release_nginx() -> set[str]:
    release = machine_release()
    versions = release_versions(release) if release else set()
    if not versions:
        pytest.skip(f"apt knows no nginx of this machine's release {release!r} "
                    "(no apt lists: make tools runs apt-get update)")
    return versions


def test_a_cached_binary_that_does_not_run_is_fetched_again(
        tmp_path: Path, release_nginx: set[str]) -> None:
    build = tmp_path / "build"
    binary = build / "root" / "usr" / "sbin" / "nginx"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\necho 'error while loading shared libraries' >&2\nexit 127\n")
    binary.chmod(0o755)
    # A .deb left by an earlier fetch from another source (here: not even a package).
    (build / "debs").mkdir()
    (build / "debs" / "nginx_99.0-1_amd64.deb").write_text("not this release's nginx\n")

    done = fetch(build)

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == str(binary)
    assert "does not run; fetching it again" in done.stderr
    ran = subprocess.run([str(binary), "-v"], capture_output=True, text=True, check=False)
    assert ran.returncode == 0 and "nginx version: nginx/" in ran.stderr
    debs = sorted((build / "debs").glob("nginx_*.deb"))
    assert len(debs) == 1 and deb_version(debs[0]) in release_nginx


def test_a_cached_binary_that_runs_is_used_as_it_is(
        tmp_path: Path, release_nginx: set[str]) -> None:
    build = tmp_path / "build"
    assert fetch(build).returncode == 0
    binary = build / "root" / "usr" / "sbin" / "nginx"
    before = binary.stat().st_mtime_ns
    (build / "debs").rename(tmp_path / "moved")  # nothing left to unpack or download from

    again = fetch(build)

    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == str(binary) and again.stderr == ""
    assert binary.stat().st_mtime_ns == before
