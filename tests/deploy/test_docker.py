"""deploy/Dockerfile and docker-compose.yml, checked without a Docker engine: stages,
COPY sources, entry points, and a compose file consistent with the CLIs."""

from __future__ import annotations

import posixpath

import pytest

from bridge.cri.runtime_service import default_socket
from bridge.transport import connect
from tests.deploy import support as s


@pytest.fixture(scope="module")
def stages() -> list[s.Stage]:
    return s.read_dockerfile(s.DOCKERFILE)[1]


def test_two_stages_on_python_311_slim(stages: list[s.Stage]) -> None:
    builder, final = stages
    assert builder.name == "builder" and final.name is None
    assert builder.image == final.image == "python:3.11-slim"
    requires = s.pyproject()["project"]["requires-python"]
    assert requires == ">=3.11"


def test_builder_installs_the_package_from_the_repository(stages: list[s.Stage]) -> None:
    runs = " ".join(i.args for i in stages[0].all("RUN"))
    assert "/opt/nri-webhook-bridge/bin/pip install ." in runs
    assert "python -m venv /opt/nri-webhook-bridge" in runs


def test_copy_sources_exist_and_cover_every_package(stages: list[s.Stage]) -> None:
    copied: set[str] = set()
    for inst in stages[0].all("COPY"):
        flags, sources, _ = s.copy_sources(inst)
        assert not flags
        for src in sources:
            assert (s.REPO / src).exists(), f"COPY {src}: not in the repository"
            copied.add(src.rstrip("/"))
    # Everything setuptools needs: pyproject, its readme, and every package it finds.
    project = s.pyproject()
    assert {"pyproject.toml", project["project"]["readme"]} <= copied
    include = project["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = {p.name for p in s.REPO.iterdir()
                if (p / "__init__.py").is_file() and any(p.name + "*" == i for i in include)}
    assert packages == {"bridge", "policy_server"} and packages <= copied
    # The generated protobuf modules are committed, so the image needs no codegen.
    assert (s.REPO / "bridge" / "proto" / "nri" / "api_pb2.py").is_file()


def test_final_stage_takes_the_venv_from_the_builder(stages: list[s.Stage]) -> None:
    copies = [s.copy_sources(i) for i in stages[1].all("COPY")]
    assert copies == [({"from": "builder"}, ["/opt/nri-webhook-bridge"],
                       "/opt/nri-webhook-bridge")]
    env = " ".join(i.args for i in stages[1].all("ENV"))
    assert "PATH=/opt/nri-webhook-bridge/bin:$PATH" in env


def test_final_stage_is_non_root_and_runs_a_console_script(stages: list[s.Stage]) -> None:
    final = stages[1]
    user = final.all("USER")[-1].args
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) > 0 and gid == uid
    assert not final.all("ENTRYPOINT"), "each container names its program"
    cmd = final.all("CMD")[-1].exec_form()
    assert cmd[0] in s.project_scripts()
    s.parse_command(cmd)


def test_final_stage_has_curl_for_the_socket_probes(stages: list[s.Stage]) -> None:
    runs = " ".join(i.args for i in stages[1].all("RUN"))
    assert "apt-get install --yes --no-install-recommends curl" in runs
    assert "rm -rf /var/lib/apt/lists/*" in runs


def test_dockerignore_keeps_every_copied_path() -> None:
    ignore = (s.DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    patterns = [line.strip() for line in ignore if line.strip() and not line.startswith("#")]
    assert patterns[0] == "**"
    kept = {p[1:].rstrip("/") for p in patterns if p.startswith("!")}
    for inst in s.read_dockerfile(s.DOCKERFILE)[1][0].all("COPY"):
        for src in s.copy_sources(inst)[1]:
            assert src.rstrip("/") in kept, f"{src} is excluded from the build context"


# --- docker-compose.yml -----------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> s.Compose:
    return s.Compose()


def test_compose_builds_both_services_from_the_dockerfile(compose: s.Compose) -> None:
    assert set(compose.services) == {"bridge", "policy-server"}
    for svc in compose.services.values():
        build = svc["build"]
        assert (s.REPO / build["context"] / build["dockerfile"]).resolve() == s.DOCKERFILE
        assert svc["command"][0] in s.project_scripts()
        assert "entrypoint" not in svc
    assert compose.bridge["image"] == compose.policy["image"]
    assert compose.bridge["depends_on"]["policy-server"]["condition"] == "service_healthy"


def test_compose_bind_mounts_the_nri_directory(compose: s.Compose) -> None:
    socket = compose.bridge_args.nri_socket
    assert socket == connect.DEFAULT_SOCKET_PATH
    nri = [m for m in compose.mounts(compose.bridge) if m["target"] == posixpath.dirname(socket)]
    assert nri == [{"type": "bind", "source": "/var/run/nri", "target": "/var/run/nri",
                    "read_only": True, "bind": {"create_host_path": False}}]
    assert all(m["target"] != "/var/run/nri" for m in compose.mounts(compose.policy))


def test_compose_bind_mounts_the_cri_socket_directory(compose: s.Compose) -> None:
    socket = compose.bridge_args.cri_socket
    assert socket == default_socket("containerd")
    cri = [m for m in compose.mounts(compose.bridge) if m["target"] == posixpath.dirname(socket)]
    assert cri == [{"type": "bind", "source": "/run/containerd", "target": "/run/containerd",
                    "read_only": True, "bind": {"create_host_path": False}}]
    assert all(m["target"] != "/run/containerd" for m in compose.mounts(compose.policy))


def test_compose_sockets_meet_on_a_shared_tmpfs_volume(compose: s.Compose) -> None:
    uds = compose.policy_args.uds
    control = compose.bridge_args.control_socket
    assert s.unix_url_path(compose.policy_args.bridge_control) == control
    config = compose.host_file(compose.bridge, compose.bridge_args.config)
    hooks = s.bridge_webhooks(config.read_text(encoding="utf-8"), str(config))
    assert hooks and all(h.endpoint.socket_path == uds for h in hooks)
    volumes = {compose.volume_at(svc, path) for svc in (compose.bridge, compose.policy)
               for path in (uds, control)}
    assert len(volumes) == 1
    (name,) = volumes
    opts = compose.doc["volumes"][name]["driver_opts"]
    assert opts["type"] == "tmpfs"
    options = dict(o.split("=") for o in opts["o"].split(","))
    # Both run as root without capabilities (the policy server for the pod cgroup writes);
    # the sockets are shared through the group, nobody else may enter.
    policy_uid, policy_gid = compose.policy["user"].split(":")
    bridge_uid, bridge_gid = compose.bridge["user"].split(":")
    assert bridge_uid == policy_uid == "0"
    assert options["uid"] == policy_uid and options["gid"] == policy_gid == bridge_gid
    assert options["mode"] == "0770"
    assert compose.policy_args.socket_mode == "0660"


def test_compose_uses_the_daemonset_configuration(compose: s.Compose) -> None:
    config = compose.host_file(compose.bridge, compose.bridge_args.config)
    rules = compose.host_file(compose.policy, str(compose.policy_args.rules))
    assert config == s.BASE / "bridge-config.yaml"
    assert rules == s.BASE / "rules.yaml"
    s.koordinator_rules(rules.read_text(encoding="utf-8"))


def test_compose_healthchecks_probe_the_right_sockets(compose: s.Compose) -> None:
    bridge_check = compose.bridge["healthcheck"]["test"]
    policy_check = compose.policy["healthcheck"]["test"]
    assert bridge_check[0] == policy_check[0] == "CMD"
    assert s.curl_unix_target(bridge_check[1:]) == (compose.bridge_args.control_socket,
                                                    "/readyz")
    assert s.curl_unix_target(policy_check[1:]) == (compose.policy_args.uds, "/healthz")


def test_compose_policy_server_writes_the_host_cgroup_tree(compose: s.Compose) -> None:
    assert compose.policy_args.pod_cgroup_writes == "on"
    root = str(compose.policy_args.cgroup_root)
    mounts = [m for m in compose.mounts(compose.policy) if m["target"] == root]
    assert mounts == [{"type": "bind", "source": "/sys/fs/cgroup", "target": root,
                       "bind": {"create_host_path": False}}]
    assert not mounts[0].get("read_only")


def test_compose_services_are_locked_down(compose: s.Compose) -> None:
    for svc in compose.services.values():
        assert svc["network_mode"] == "none"
        assert svc["read_only"] is True
        assert svc["cap_drop"] == ["ALL"]
        assert "no-new-privileges:true" in svc["security_opt"]
        assert "privileged" not in svc and "cap_add" not in svc
