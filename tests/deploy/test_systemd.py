"""The systemd units: command lines the CLIs accept, sockets that meet, hardening that
leaves every path the services use reachable."""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

import pytest

from bridge.config_file import load_text
from bridge.cri.runtime_service import default_socket
from bridge.transport import connect
from tests.deploy import support as s

INSTALL_BIN = "/opt/nri-webhook-bridge/bin"


class Units:
    def __init__(self) -> None:
        self.bridge = s.read_unit(s.SYSTEMD / "nri-webhook-bridge.service")
        self.policy = s.read_unit(s.SYSTEMD / "nri-policy-server.service")
        program, self.bridge_args = s.parse_command(s.exec_argv(self.bridge))
        assert program == s.BRIDGE
        program, self.policy_args = s.parse_command(s.exec_argv(self.policy))
        assert program == s.POLICY_SERVER

    def example(self, installed_path: str) -> Path:
        """The example file in deploy/systemd that is installed at ``installed_path``."""
        path = s.SYSTEMD / posixpath.basename(installed_path)
        assert path.is_file(), f"no example for {installed_path} in deploy/systemd"
        return path


@pytest.fixture(scope="module")
def units() -> Units:
    return Units()


def _runtime_dir(unit: s.Unit) -> str:
    return "/run/" + unit.value("Service", "RuntimeDirectory")


def test_exec_start_runs_the_installed_console_scripts(units: Units) -> None:
    scripts = s.project_scripts()
    for unit in (units.bridge, units.policy):
        program = s.exec_argv(unit)[0]
        assert posixpath.dirname(program) == INSTALL_BIN
        assert posixpath.basename(program) in scripts


def test_bridge_starts_after_the_runtime_and_the_policy_server(units: Units) -> None:
    after = units.bridge.words("Unit", "After")
    wants = units.bridge.words("Unit", "Wants")
    for dep in ("containerd.service", "nri-policy-server.service"):
        assert dep in after and dep in wants
    assert "nri-webhook-bridge.service" in units.policy.words("Unit", "Before")


def test_both_restart_always_and_install_into_multi_user(units: Units) -> None:
    for unit in (units.bridge, units.policy):
        assert unit.value("Service", "Restart") == "always"
        assert unit.value("Install", "WantedBy") == "multi-user.target"
        assert unit.value("Service", "Type") == "exec"


def test_bridge_dials_the_default_nri_socket(units: Units) -> None:
    assert units.bridge_args.nri_socket == connect.DEFAULT_SOCKET_PATH
    # Nothing may hide the runtime's socket directory from the bridge.
    for key in ("InaccessiblePaths", "TemporaryFileSystem", "RootDirectory", "PrivateNetwork"):
        assert not units.bridge.values("Service", key), key


def test_bridge_sends_updates_to_containerds_cri_socket(units: Units) -> None:
    # The unit is written for containerd (After=containerd.service): its CRI socket.
    assert units.bridge_args.cri_socket == default_socket("containerd")
    assert units.bridge_args.update_route is None  # auto: the config's, else the default
    config = units.example(units.bridge_args.config)
    assert load_text(config.read_text(encoding="utf-8"), str(config)).updates.route == "auto"


def test_policy_socket_is_in_the_policy_servers_runtime_directory(units: Units) -> None:
    uds = units.policy_args.uds
    assert posixpath.dirname(uds) == _runtime_dir(units.policy)
    config = units.example(units.bridge_args.config)
    hooks = s.bridge_webhooks(config.read_text(encoding="utf-8"), str(config))
    assert hooks and all(h.endpoint.socket_path == uds for h in hooks)
    assert units.policy_args.socket_mode == "0660"


def test_control_socket_is_in_the_bridges_runtime_directory(units: Units) -> None:
    control = units.bridge_args.control_socket
    assert control and posixpath.dirname(control) == _runtime_dir(units.bridge)
    assert s.unix_url_path(units.policy_args.bridge_control) == control


def test_sockets_are_shared_through_one_group_created_by_sysusers(units: Units) -> None:
    lines = [line.split() for line in
             (s.SYSTEMD / "nri-webhook-bridge.sysusers.conf").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    groups = {w[1] for w in lines if w[0] == "g"}
    users = {w[1]: w[2] for w in lines if w[0] == "u"}
    group = units.bridge.value("Service", "Group")
    assert units.policy.value("Service", "Group") == group and group in groups
    # Both root without capabilities: the NRI socket and the pod cgroup files are root's.
    assert units.policy.value("Service", "User") == units.bridge.value("Service", "User") == "root"
    assert not users
    for unit in (units.bridge, units.policy):
        # Group may enter the directory, others may not; sockets come out 0660.
        assert unit.value("Service", "RuntimeDirectoryMode") == "0750"
        assert unit.value("Service", "UMask") == "0007"


def test_hardening(units: Units) -> None:
    for unit in (units.bridge, units.policy):
        service = dict(unit.sections["Service"])
        # Root without any capability: the NRI socket is reachable as its owner.
        assert service["CapabilityBoundingSet"] == ""
        assert service["AmbientCapabilities"] == ""
        for key in ("NoNewPrivileges", "ProtectHome", "PrivateTmp", "PrivateDevices",
                    "ProtectKernelTunables", "ProtectKernelModules",
                    "RestrictSUIDSGID", "LockPersonality"):
            assert service[key] == "yes", (unit.path.name, key)
        assert service["ProtectSystem"] == "strict"
        assert re.fullmatch(r"[0-9]+M", service["MemoryMax"])
    # Under ProtectSystem=strict a service writes only its RuntimeDirectory, and the policy
    # server the cgroup tree for its node effects.
    assert units.bridge.value("Service", "ProtectControlGroups") == "yes"
    assert not units.bridge.values("Service", "ReadWritePaths")
    assert units.policy.value("Service", "ProtectControlGroups") == "no"
    assert units.policy.values("Service", "ReadWritePaths") == ["/sys/fs/cgroup"]
    # The policy server's only sockets are Unix sockets.
    assert units.policy.words("Service", "RestrictAddressFamilies") == ["AF_UNIX"]
    assert units.policy.value("Service", "PrivateNetwork") == "yes"
    assert units.policy_args.host is None and units.policy_args.port is None
    assert units.policy_args.pod_cgroup_writes == "on"
    # The bridge may call https:// policies too.
    assert set(units.bridge.words("Service", "RestrictAddressFamilies")) == {
        "AF_UNIX", "AF_INET", "AF_INET6"}


def test_example_rules_load_and_the_commented_topology_too(units: Units) -> None:
    path = units.example(str(units.policy_args.rules))
    text = path.read_text(encoding="utf-8")
    assert s.koordinator_rules(text).topology is None
    uncommented = re.sub(r"^# (topology:|  (?:node|kubelet)\.)", r"\1", text, flags=re.M)
    topology: Any = s.koordinator_rules(uncommented).topology
    assert topology is not None
    assert topology.cpu_shared_pools and topology.system_qos_cpuset == "0-1"


def test_example_config_validates_like_validate_config(units: Units,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from bridge import cli

    path = units.example(units.bridge_args.config)
    assert cli.main(["validate-config", str(path)]) == 0
    assert capsys.readouterr().out.strip() == f"{path}: ok"
