"""The built-in policies (issue 11) against real containerd (1.7.24 and 2.1.9).

Each test enables one policy by name on ``nri-policy-server --policy NAME=CONFIG``, points a
bridge webhook at it with the privileged kind it needs in ``allow``, and checks what the
container really got:

- hook-injector: hook files from a hooks directory run when containers start, as their
  ``when`` conditions say (``always``; an annotation on one pod; ``commands`` and
  ``hasBindMounts`` that these containers do not meet), with the container's OCI state from runc;
- device-injector: an annotated device node and host directory appear inside the container
  (opened and read there with CRI ExecSync), and a device or a host directory outside the
  allow lists makes CreateContainer fail with the policy's reason in the CRI error;
- ulimit-adjuster: the annotated rlimits are the container process's ``/proc/<pid>/limits``.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

import grpc
import pytest

from .conftest import Stack, StackFactory, outcome_of
from .containerd import Containerd
from .cri import CriClient
from .inspect_proc import environ_after_exec

pytestmark = pytest.mark.e2e

HOOK_SCRIPT = """#!/bin/sh
# An OCI hook: runc writes the container's state (JSON) to stdin; keep one line per call.
cat >> "$1"
echo >> "$1"
"""


def _workdir(containerd: Containerd, prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix, dir=containerd.dirs.base))


def _start(start_stack: StackFactory, name: str, config: Path, allow: list[str]) -> Stack:
    webhook = {"name": name, "events": ["CreateContainer"], "failure_policy": "Fail",
               "allow": allow}  # fmt: skip
    return start_stack(
        webhooks=[webhook], koordinator=False, builtin_policies=(f"{name}={config}",)
    )


def test_hook_from_the_hooks_dir_runs_at_container_start(
    containerd: Containerd, clean_pods: CriClient, start_stack: StackFactory
) -> None:
    work = _workdir(containerd, "hooks-")
    script = work / "record-state"
    script.write_text(HOOK_SCRIPT)
    script.chmod(0o755)
    audited, never = work / "audited.jsonl", work / "never.jsonl"
    hooks_dir = work / "hooks.d"
    hooks_dir.mkdir()
    (hooks_dir / "50-audit.json").write_text(json.dumps({
        "version": "1.0.0",
        "hook": {"path": str(script), "args": ["record-state", str(audited)], "timeout": 10},
        "when": {"annotations": {"^e2e\\.example\\.com/audit$": "^yes$"}},
        "stages": ["createRuntime"],
    }))  # fmt: skip
    (hooks_dir / "60-never.json").write_text(json.dumps({
        "version": "1.0.0",
        "hook": {"path": str(script), "args": ["record-state", str(never)]},
        "when": {"commands": ["^/no/such/program$"]},
        "stages": ["prestart"],
    }))  # fmt: skip
    always = work / "always.jsonl"
    (hooks_dir / "10-always.json").write_text(json.dumps({
        "version": "1.0.0",
        "hook": {"path": str(script), "args": ["record-state", str(always)]},
        "when": {"always": True},
        "stages": ["poststart"],
    }))  # fmt: skip
    # These containers have no volumes: only the runtime's own binds (/etc/hosts, ...).
    binds = work / "binds.jsonl"
    (hooks_dir / "70-binds.json").write_text(json.dumps({
        "version": "1.0.0",
        "hook": {"path": str(script), "args": ["record-state", str(binds)]},
        "when": {"hasBindMounts": True},
        "stages": ["prestart"],
    }))  # fmt: skip
    config = work / "hook-injector.yaml"
    # The CRI pods of these tests are in namespace default: it may choose hooks by annotation.
    config.write_text(f"hooks_dirs: [{hooks_dir}]\nnamespaces: [default]\n")
    stack = _start(start_stack, "hook-injector", config, ["hooks"])

    pod = clean_pods.run_pod("hooked", annotations={"e2e.example.com/audit": "yes"})
    hooked = clean_pods.run_container(pod)
    assert outcome_of(stack, "hook-injector", "CreateContainer", pod) == "ok"
    plain_pod = clean_pods.run_pod("unhooked")
    plain = clean_pods.run_container(plain_pod)
    assert outcome_of(stack, "hook-injector", "CreateContainer", plain_pod) == "ok"

    # createRuntime hooks run inside `runc create`, i.e. before StartContainer returned.
    states = [json.loads(line) for line in audited.read_text().splitlines() if line.strip()]
    assert [s["id"] for s in states] == [hooked], states
    assert states[0]["pid"] == clean_pods.container_pid(hooked)
    assert not never.exists() and not binds.exists()
    # poststart hooks run after the start; runc waits for them before StartContainer returns.
    started = [json.loads(line)["id"] for line in always.read_text().splitlines() if line]
    assert sorted(started) == sorted([hooked, plain]), started
    assert clean_pods.container_pid(plain) > 0


def test_device_and_mount_from_annotations_and_a_refused_device(
    containerd: Containerd, clean_pods: CriClient, start_stack: StackFactory
) -> None:
    work = _workdir(containerd, "devices-")
    shared = work / "shared" / "data"
    shared.mkdir(parents=True)
    (shared / "hello.txt").write_text("from the host\n")
    config = work / "device-injector.yaml"
    config.write_text(
        "allowed_devices: [/dev/fuse]\n"
        f"allowed_mount_sources: [{work / 'shared'}]\n"
        "namespaces: [default]\n"
    )
    stack = _start(start_stack, "device-injector", config, ["devices", "mounts"])

    pod = clean_pods.run_pod("devices", annotations={
        "devices.noderesource.dev/container.app": "[{path: /dev/fuse, file_mode: '0666'}]",
        "mounts.noderesource.dev/container.app":
            f"[{{source: {shared}, destination: /data, options: [ro]}}]",
    })  # fmt: skip
    container = clean_pods.run_container(pod)
    assert outcome_of(stack, "device-injector", "CreateContainer", pod) == "ok"
    host = os.stat("/dev/fuse").st_rdev
    pid = clean_pods.container_pid(container)
    inside = os.stat(f"/proc/{pid}/root/dev/fuse")
    assert inside.st_rdev == host and inside.st_mode & 0o777 == 0o666
    # Opened and read from inside the container: the node, its cgroup rule and the mount.
    code, out = clean_pods.exec_sync(
        container, ["/bin/sh", "-c", "exec 3</dev/fuse && echo opened && cat /data/hello.txt"]
    )
    assert (code, out) == (0, "opened\nfrom the host\n"), out
    code, out = clean_pods.exec_sync(container, ["/bin/sh", "-c", "echo x > /data/new"])
    assert code != 0 and "Read-only file system" in out, out

    # /dev/loop0 exists on the host but is not in allowed_devices: CreateContainer fails and
    # the CRI error carries the policy's reason.
    denied_pod = clean_pods.run_pod("denied", annotations={
        "devices.noderesource.dev/pod": "[/dev/loop0]"})  # fmt: skip
    with pytest.raises(grpc.RpcError) as failure:
        clean_pods.create_container(denied_pod)
    details = str(failure.value.details())
    assert 'webhook "device-injector" rejected CreateContainer' in details, details
    assert (
        "annotation devices.noderesource.dev/pod: device /dev/loop0 is not allowed on this "
        "node (allowed_devices)"
    ) in details, details
    # The same for a host directory outside allowed_mount_sources.
    escape_pod = clean_pods.run_pod("escape", annotations={
        "mounts.noderesource.dev/container.app": "[{source: /etc, destination: /host-etc}]"})
    with pytest.raises(grpc.RpcError) as failure:
        clean_pods.create_container(escape_pod)
    details = str(failure.value.details())
    assert "mount source /etc is not allowed on this node (allowed_mount_sources)" in details


def test_cdi_device_from_an_annotation(
    containerd: Containerd, clean_pods: CriClient, start_stack: StackFactory
) -> None:
    """A CDI device named in an annotation is resolved by the runtime from its spec dirs
    (containerd 2.1.9); on containerd 1.7.24 the policy refuses it with the reason."""
    spec = {"cdiVersion": "0.6.0", "kind": "e2e.example.com/marker",
            "devices": [{"name": "one", "containerEdits": {"env": ["CDI_MARKER=from-cdi"]}}]}
    (containerd.dirs.subdir("cdi") / "e2e-marker.json").write_text(json.dumps(spec))
    config = _workdir(containerd, "cdi-") / "device-injector.yaml"
    config.write_text("allowed_cdi_devices: [e2e.example.com/marker=*]\nnamespaces: [default]\n")
    stack = _start(start_stack, "device-injector", config, ["cdi_devices"])

    pod = clean_pods.run_pod("cdi", annotations={
        "cdi-devices.noderesource.dev/container.app": "[e2e.example.com/marker=one]"})
    if containerd.runtime.version.startswith("1.7"):
        # NRI 0.6.1 has no CDI_devices field: the runtime would drop it without a word, so
        # the policy refuses instead of letting the container start without its device.
        with pytest.raises(grpc.RpcError) as failure:
            clean_pods.create_container(pod)
        details = str(failure.value.details())
        assert "CDI devices need NRI 0.7 or later; containerd 1.7.24" in details, details
        assert "speaks NRI 0.6.1 and would start the container without them" in details
        return
    container = clean_pods.run_container(pod)
    assert outcome_of(stack, "device-injector", "CreateContainer", pod) == "ok"
    env = environ_after_exec(clean_pods.container_pid(container))
    assert env.get("CDI_MARKER") == "from-cdi", sorted(env)


def _limits(pid: int) -> dict[str, tuple[str, str]]:
    """``/proc/<pid>/limits``: limit name -> (soft, hard)."""
    out = {}
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines()[1:]:
        match = re.match(r"^(.+?)\s{2,}(\S+)\s+(\S+)", line)
        if match:
            out[match.group(1)] = (match.group(2), match.group(3))
    return out


def test_rlimits_from_annotations_in_proc_limits(
    containerd: Containerd, clean_pods: CriClient, start_stack: StackFactory
) -> None:
    # Limits below this machine's own (nofile 20000 here): raising a hard limit needs
    # CAP_SYS_RESOURCE, which a normal node's runtime has and this test VM does not.
    config = _workdir(containerd, "ulimits-") / "ulimit-adjuster.yaml"
    config.write_text("max: {nofile: 1048576, nproc: 65536}\n")
    stack = _start(start_stack, "ulimit-adjuster", config, ["rlimits"])

    pod = clean_pods.run_pod("ulimits", annotations={
        "ulimits.noderesource.dev/container.app":
            "[{type: nofile, soft: 1024, hard: 4096}, {type: RLIMIT_NPROC, hard: 777}]",
    })  # fmt: skip
    container = clean_pods.run_container(pod)
    assert outcome_of(stack, "ulimit-adjuster", "CreateContainer", pod) == "ok"
    limits = _limits(clean_pods.container_pid(container))
    assert limits["Max open files"] == ("1024", "4096"), limits
    assert limits["Max processes"] == ("777", "777"), limits

    plain_pod = clean_pods.run_pod("ulimits-plain")
    plain = clean_pods.run_container(plain_pod)
    assert outcome_of(stack, "ulimit-adjuster", "CreateContainer", plain_pod) == "no_change"
    assert _limits(clean_pods.container_pid(plain))["Max open files"] != ("1024", "4096")

    over_pod = clean_pods.run_pod("ulimits-over", annotations={
        "ulimits.noderesource.dev/pod": "[{type: nofile, hard: 2000000}]"})  # fmt: skip
    with pytest.raises(grpc.RpcError) as failure:
        clean_pods.create_container(over_pod)
    details = str(failure.value.details())
    assert "hard limit 2000000 exceeds this node's maximum 1048576" in details, details
