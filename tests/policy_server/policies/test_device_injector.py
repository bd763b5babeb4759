"""device-injector, tested with the policy test kit: allow lists, host device numbers, reasons."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from policy_server.policies import PolicyConfigError
from policy_server.testing import PolicyRunner, make_request
from policy_server.testing.plugin import RunnerFactory

ROOT = Path(__file__).parents[3]
REQUESTS = ROOT / "examples" / "requests"
DEVICES = "devices.noderesource.dev/container.app"
MOUNTS = "mounts.noderesource.dev/container.app"
CDI = "cdi-devices.noderesource.dev/container.app"


def host_numbers(path: str) -> tuple[int, int]:
    rdev = os.stat(path).st_rdev
    return os.major(rdev), os.minor(rdev)


@pytest.fixture
def runner(policy_runner: RunnerFactory, tmp_path: Path) -> PolicyRunner:
    (tmp_path / "shared" / "models").mkdir(parents=True)
    return policy_runner(builtin="device-injector", config={
        "allowed_devices": ["/dev/null", "/dev/ful?"],
        "allowed_mount_sources": [str(tmp_path / "shared")],
        "allowed_mount_types": ["tmpfs"],
        "allowed_cdi_devices": ["vendor.example.com/gpu=*"],
        "namespaces": ["default"],
    })  # fmt: skip


def send(runner: PolicyRunner, annotations: dict[str, str]) -> Any:
    return runner.send(make_request("CreateContainer", pod_annotations=annotations))


def test_devices_get_the_hosts_numbers(runner: PolicyRunner) -> None:
    reply = send(runner, {DEVICES: "[/dev/null, {path: /dev/full, file_mode: '0640', uid: 7}]"})
    null, full = host_numbers("/dev/null"), host_numbers("/dev/full")
    assert reply.adjust == {"linux": {"devices": [
        {"path": "/dev/null", "type": "c", "major": null[0], "minor": null[1]},
        {"path": "/dev/full", "type": "c", "major": full[0], "minor": full[1],
         "file_mode": 0o640, "uid": 7},
    ]}}  # fmt: skip


def test_mounts_and_cdi_devices(runner: PolicyRunner, tmp_path: Path) -> None:
    source = tmp_path / "shared" / "models"
    reply = send(runner, {
        MOUNTS: f"[{{source: {source}, destination: /models, options: [ro]}}, "
                "{destination: /scratch, type: tmpfs, options: [size=1m]}]",
        CDI: "vendor.example.com/gpu=0",
    })  # fmt: skip
    assert reply.adjust == {
        "mounts": [
            {"destination": "/models", "type": "bind", "source": str(source),
             "options": ["ro", "rbind"]},
            {"destination": "/scratch", "type": "tmpfs", "source": "tmpfs",
             "options": ["size=1m"]},
        ],
        "CDI_devices": [{"name": "vendor.example.com/gpu=0"}],
    }  # fmt: skip


def test_cdi_devices_are_refused_on_runtimes_that_would_drop_them(runner: PolicyRunner) -> None:
    request = make_request(
        "CreateContainer",
        runtime={"name": "containerd", "version": "1.7.24"},
        pod_annotations={"cdi-devices.noderesource.dev/pod": "vendor.example.com/gpu=0"},
    )
    assert runner.send(request).reject == (
        "devices: annotation cdi-devices.noderesource.dev/pod: CDI devices need NRI 0.7 or "
        "later; containerd 1.7.24 speaks NRI 0.6.1 and would start the container without them")
    request["runtime"] = {"name": "containerd", "version": "v2.1.9"}
    assert runner.send(request).adjust == {"CDI_devices": [{"name": "vendor.example.com/gpu=0"}]}
    # The bridge's capabilities list decides when the envelope carries one.
    request["runtime"] = {"name": "x-runtime", "version": "9", "nri_version": "v0.6.1",
                          "capabilities": ["env", "mounts"]}  # fmt: skip
    assert "x-runtime 9 speaks NRI 0.6.1" in str(runner.send(request).reject)
    request["runtime"]["capabilities"].append("CDI_devices")
    assert runner.send(request).adjust == {"CDI_devices": [{"name": "vendor.example.com/gpu=0"}]}


@pytest.mark.parametrize(
    ("annotations", "reason"),
    [
        ({DEVICES: "[/dev/zero]"}, "device /dev/zero is not allowed on this node (allowed_dev"),
        ({DEVICES: "[/dev/fully-missing]"}, "not allowed on this node"),
        ({DEVICES: "[{path: /dev/null, major: 8, minor: 0}]"},
         "device /dev/null: major 8 does not match the host's"),
        ({DEVICES: "[dev/null]"}, "item 0.path: expected an absolute path, got 'dev/null'"),
        ({DEVICES: "[/dev/../dev/null]"}, "contains '..'"),
        ({DEVICES: '["/dev/nu\\0ll"]'}, "contains a NUL byte"),
        ({DEVICES: "[/dev/null, /dev/null]"}, "/dev/null is given twice"),
        ({DEVICES: "[{path: /dev/null, file_mode: '999'}]"}, "'999' is not an octal mode"),
        ({DEVICES: "[{path: /dev/null, owner: me}]"}, "unknown field 'owner'"),
        ({MOUNTS: "[{source: /etc, destination: /host-etc}]"},
         "mount source /etc is not allowed on this node (allowed_mount_sources)"),
        ({MOUNTS: "[{source: /, destination: /host}]"}, "mount source / is not allowed"),
        ({MOUNTS: "[{destination: /x, type: proc}]"},
         "mount type 'proc' is not allowed on this node (allowed_mount_types)"),
        ({MOUNTS: "[{source: /srv, destination: relative}]"},
         "item 0.destination: expected an absolute path"),
        ({MOUNTS: "[{destination: /, type: tmpfs}]"}, "cannot mount over the container's /"),
        ({CDI: "[nvidia.com/gpu=0]"},
         "CDI device nvidia.com/gpu=0 is not allowed on this node (allowed_cdi_devices)"),
        ({CDI: "[gpu0]"}, "expected a CDI device name like vendor.com/class=name"),
        ({DEVICES: "{path: [}"}, "not valid YAML"),
    ],
)
def test_refusals_name_the_annotation_and_the_reason(
    runner: PolicyRunner, annotations: dict[str, str], reason: str
) -> None:
    reply = send(runner, annotations)
    key = next(iter(annotations))
    assert reply.reject is not None and reply.reject.startswith(f"devices: annotation {key}: ")
    assert reason in reply.reject, reply.reject
    assert "adjust" not in reply.json


def test_symlinks_out_of_an_allowed_directory_are_refused(
    policy_runner: RunnerFactory, tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "etc").symlink_to("/etc")
    runner = policy_runner(builtin="device-injector",
                           config={"allowed_mount_sources": [str(shared)],
                                   "namespaces": ["default"]})  # fmt: skip
    reply = send(runner, {MOUNTS: f"[{{source: {shared}/etc, destination: /e}}]"})
    assert reply.reject is not None
    assert f"mount source {shared}/etc (resolves to /etc) is not allowed" in reply.reject
    # A link that stays inside is fine, and the runtime gets the resolved path.
    (shared / "data").mkdir()
    (shared / "current").symlink_to(shared / "data")
    reply = send(runner, {MOUNTS: f"[{{source: {shared}/current, destination: /d}}]"})
    assert reply.adjust["mounts"][0]["source"] == str((shared / "data").resolve())


def test_an_internal_error_rejects_instead_of_starting_without_the_device(
    runner: PolicyRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    from policy_server.policies.device_injector import HostView

    def broken(self: HostView, path: str) -> None:
        raise RuntimeError("stat exploded")

    monkeypatch.setattr(HostView, "device", broken)
    reply = send(runner, {DEVICES: "[/dev/null]"})
    assert reply.reject == "devices: internal error (RuntimeError: stat exploded)"


def test_nothing_is_allowed_by_default(policy_runner: RunnerFactory) -> None:
    runner = policy_runner(builtin="device-injector")
    assert send(runner, {}).json == {}
    # No namespace is listed: no pod may ask at all.
    assert "not granted to pods of namespace 'default'" in str(
        send(runner, {DEVICES: "[/dev/null]"}).reject
    )
    # A listed namespace still gets only what the allow lists name (none).
    scoped = policy_runner(builtin="device-injector", config={"namespaces": ["default"]})
    assert "not allowed on this node (allowed_devices)" in str(
        send(scoped, {DEVICES: "[/dev/null]"}).reject
    )


def _in(namespace: str, annotations: dict[str, str]) -> dict[str, Any]:
    return make_request("CreateContainer", pod_annotations=annotations,
                        pod={"id": "pod-1", "name": "pod", "namespace": namespace})  # fmt: skip


@pytest.mark.parametrize(
    "annotations",
    [{DEVICES: "[/dev/null]"}, {MOUNTS: "[{source: /srv, destination: /s}]"},
     {CDI: "[vendor.example.com/gpu=0]"}],
    ids=["devices", "mounts", "cdi-devices"],
)  # fmt: skip
def test_annotations_are_honoured_only_in_the_configured_namespaces(
    runner: PolicyRunner, policy_runner: RunnerFactory, annotations: dict[str, str]
) -> None:
    # The operator's allow lists name the device; a pod of another namespace still gets none.
    outside = runner.send(_in("team-a", annotations))
    assert outside.reject is not None and "adjust" not in outside.json
    assert "not granted to pods of namespace 'team-a'" in outside.reject
    key = next(iter(annotations))
    assert f"annotation {key}:" in outside.reject
    # "*" lists every namespace.
    everywhere = policy_runner(builtin="device-injector", config={
        "allowed_devices": ["/dev/null"], "allowed_mount_types": ["tmpfs"],
        "allowed_cdi_devices": ["vendor.example.com/gpu=*"], "namespaces": ["*"]})  # fmt: skip
    assert everywhere.send(_in("team-a", {DEVICES: "[/dev/null]"})).adjust["linux"]["devices"]


def test_the_namespace_scope_is_the_pods_not_a_prefix(runner: PolicyRunner) -> None:
    assert runner.send(_in("default", {DEVICES: "[/dev/null]"})).reject is None
    for namespace in ("default2", "defaul", "", "Default"):
        assert runner.send(_in(namespace, {DEVICES: "[/dev/null]"})).reject is not None


def test_shipped_fixtures(policy_runner: RunnerFactory) -> None:
    runner = policy_runner(builtin="device-injector",
                           config=ROOT / "examples" / "policies" / "device-injector.yaml")
    fuse = runner.send(REQUESTS / "device-create-fuse.json")
    if os.path.exists("/dev/fuse"):
        assert fuse.adjust["linux"]["devices"][0]["path"] == "/dev/fuse"
        assert fuse.adjust["linux"]["devices"][0]["file_mode"] == 0o666
        assert [m["destination"] for m in fuse.adjust["mounts"]] == ["/models", "/scratch"]
    else:
        assert fuse.reject is not None and "/dev/fuse does not exist on this node" in fuse.reject
    denied = runner.send(REQUESTS / "device-create-disallowed.json")
    assert denied.reject == ("devices: annotation devices.noderesource.dev/pod: device /dev/loop0 "
                             "is not allowed on this node (allowed_devices)")  # fmt: skip


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"allowed_devices": ["/etc/passwd"]}, r"allowed_devices\[0\]: expected a /dev/ path"),
        ({"allowed_mount_sources": ["/"]}, r"allowed_mount_sources\[0\]: expected an absolute"),
        ({"allowed_mount_sources": ["relative"]}, r"allowed_mount_sources\[0\]"),
        ({"allowed_devices": "/dev/fuse"}, "allowed_devices: expected a list of strings"),
        ({"allow": []}, "allow: unknown key"),
    ],
)
def test_bad_configuration(
    policy_runner: RunnerFactory, config: dict[str, Any], message: str
) -> None:
    with pytest.raises(PolicyConfigError, match=message):
        policy_runner(builtin="device-injector", config=config)
