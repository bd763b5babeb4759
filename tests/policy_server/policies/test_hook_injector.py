"""hook-injector, tested with the policy test kit: hook files, 'when' rules, live reload."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from policy_server.policies import PolicyConfigError
from policy_server.policies.oci_hooks import HookFileError, parse_hook_file
from policy_server.testing import make_request
from policy_server.testing.plugin import RunnerFactory

ROOT = Path(__file__).parents[3]
REQUESTS = ROOT / "examples" / "requests"
CONFIG = ROOT / "examples" / "policies" / "hook-injector.yaml"
LOG_START = {"path": "/usr/local/libexec/oci-hooks/log-start",
             "args": ["log-start", "--to", "/var/log/container-starts.log"], "timeout": 5}
GPU = {"path": "/usr/local/libexec/oci-hooks/gpu-setup", "env": ["GPU_SETUP_MODE=exclusive"]}
AUDIT = {"path": "/usr/local/libexec/oci-hooks/audit", "args": ["audit", "shell-with-volume"]}


def hook_file(when: dict[str, Any], stages: list[str] | None = None, path: str = "/bin/h") -> str:
    return json.dumps({"version": "1.0.0", "hook": {"path": path}, "when": when,
                       "stages": stages or ["prestart"]})  # fmt: skip


def test_shipped_hooks_and_fixtures(policy_runner: RunnerFactory) -> None:
    runner = policy_runner(builtin="hook-injector", config=CONFIG)
    annotated = runner.send(REQUESTS / "hook-create-annotated.json")
    # File-name order: 50-log-start, 60-gpu-setup, 70-shell-audit (both its stages).
    assert annotated.adjust == {"hooks": {
        "poststart": [LOG_START], "create_runtime": [GPU], "prestart": [AUDIT],
        "poststop": [AUDIT]}}  # fmt: skip
    # /app/server, no volume, no annotation: only the 'always' hook.
    assert runner.send(REQUESTS / "hook-create-plain.json").adjust == {
        "hooks": {"poststart": [LOG_START]}}


@pytest.mark.parametrize(
    ("when", "annotations", "args", "mounts", "expected"),
    [
        ({"always": True}, {}, [], [], True),
        ({"always": False}, {}, ["/bin/sh"], [], False),
        ({"annotations": {"^team$": "^a"}}, {"team": "alpha"}, [], [], True),
        ({"annotations": {"^team$": "^a"}}, {"team": "beta"}, [], [], False),
        # every pattern pair must match some annotation
        ({"annotations": {"team": ".", "tier": "gold"}}, {"team": "x", "tier": "silver"}, [],
         [], False),
        ({"commands": ["sh$"]}, {}, ["/bin/sh", "-c"], [], True),
        ({"commands": ["sh$"]}, {}, ["/app/server"], [], False),
        ({"commands": ["sh$"]}, {}, [], [], False),
        ({"hasBindMounts": True}, {}, [], ["/data"], True),
        ({"hasBindMounts": True}, {}, [], ["/etc/hosts", "/dev/shm"], False),  # runtime's own
        ({"hasBindMounts": False}, {}, [], [], False),
        # conditions combine with AND
        ({"always": True, "commands": ["^/bin/sh$"]}, {}, ["/bin/bash"], [], False),
        ({"commands": ["^/bin/sh$"], "hasBindMounts": True}, {}, ["/bin/sh"], ["/v"], True),
    ],
)
def test_when_conditions(
    tmp_path: Path, policy_runner: RunnerFactory, when: dict[str, Any],
    annotations: dict[str, str], args: list[str], mounts: list[str], expected: bool,
) -> None:
    (tmp_path / "h.json").write_text(hook_file(when))
    runner = policy_runner(builtin="hook-injector",
                           config={"hooks_dirs": [str(tmp_path)], "namespaces": ["default"]})
    container = {"id": "c1", "name": "app", "args": args, "mounts": [
        {"destination": d, "type": "bind", "source": "/x", "options": ["rbind"]} for d in mounts]}
    reply = runner.send(make_request("CreateContainer", container=container,
                                     pod_annotations=annotations))  # fmt: skip
    assert (reply.adjust == {"hooks": {"prestart": [{"path": "/bin/h"}]}}) is expected, reply.json


def test_container_annotations_override_pod_ones(
    tmp_path: Path, policy_runner: RunnerFactory
) -> None:
    (tmp_path / "h.json").write_text(hook_file({"annotations": {"^mode$": "^debug$"}}))
    runner = policy_runner(builtin="hook-injector",
                           config={"hooks_dirs": [str(tmp_path)], "namespaces": ["*"]})
    container = {"id": "c1", "name": "app", "annotations": {"mode": "quiet"}}
    assert runner.send(make_request("CreateContainer", container=container,
                                    pod_annotations={"mode": "debug"})).json == {}  # fmt: skip
    assert runner.send(make_request("CreateContainer", pod_annotations={"mode": "debug"})).adjust


def _in(namespace: str, annotations: dict[str, str]) -> dict[str, Any]:
    return make_request("CreateContainer", pod_annotations=annotations,
                        pod={"id": "pod-1", "name": "pod", "namespace": namespace})  # fmt: skip


def test_hooks_chosen_by_annotations_only_in_the_configured_namespaces(
    tmp_path: Path, policy_runner: RunnerFactory
) -> None:
    (tmp_path / "a.json").write_text(hook_file({"annotations": {"^debug$": "^on$"}}, path="/a"))
    (tmp_path / "b.json").write_text(hook_file({"always": True}, path="/b"))
    dirs = [str(tmp_path)]
    only_ops = policy_runner(builtin="hook-injector",
                             config={"hooks_dirs": dirs, "namespaces": ["ops"]})  # fmt: skip
    # A pod of another namespace cannot pull the root hook in by writing the annotation; the
    # operator's 'always' hook still applies, and the reply says what was left out.
    outside = only_ops.send(_in("team-a", {"debug": "on"}))
    assert outside.adjust == {"hooks": {"prestart": [{"path": "/b"}]}}
    assert outside.warnings == [
        "hook-injector: pod team-a/pod: hook files a.json are chosen by annotations and "
        "namespace 'team-a' is not in this node's hook-injector namespaces; not injected"]
    inside = only_ops.send(_in("ops", {"debug": "on"}))
    assert inside.adjust == {"hooks": {"prestart": [{"path": "/a"}, {"path": "/b"}]}}
    assert not inside.warnings
    # Without namespaces (the default) no pod chooses a hook by annotation.
    default = policy_runner(builtin="hook-injector", config={"hooks_dirs": dirs})
    assert default.send(_in("ops", {"debug": "on"})).adjust == {
        "hooks": {"prestart": [{"path": "/b"}]}}
    # A pod that does not ask is not warned about.
    assert only_ops.send(_in("team-a", {})).warnings == []


def test_directories_are_reread_and_later_ones_override(
    tmp_path: Path, policy_runner: RunnerFactory, caplog: pytest.LogCaptureFixture
) -> None:
    first, second = tmp_path / "usr", tmp_path / "etc"
    first.mkdir()
    (first / "a.json").write_text(hook_file({"always": True}, path="/usr/a"))
    (first / "b.json").write_text(hook_file({"always": True}, path="/usr/b"))
    runner = policy_runner(builtin="hook-injector",
                           config={"hooks_dirs": [str(first), str(second)]})  # fmt: skip
    request = make_request("CreateContainer")

    def paths() -> list[str]:
        return [h["path"] for h in runner.send(request).adjust.get("hooks", {}).get("prestart", [])]

    assert paths() == ["/usr/a", "/usr/b"]  # the second directory does not exist yet
    second.mkdir()
    (second / "b.json").write_text(hook_file({"always": True}, path="/etc/b"))
    assert paths() == ["/usr/a", "/etc/b"]
    (first / "a.json").write_text(hook_file({"always": False}, path="/usr/a"))
    os.utime(first / "a.json", ns=(1, 1))  # a different mtime even on a coarse clock
    assert paths() == ["/etc/b"]
    (second / "c.json").write_text("{not json")
    assert paths() == ["/etc/b"]
    assert "skipping hook file" in caplog.text and "c.json: not JSON" in caplog.text
    shutil.rmtree(second)
    assert paths() == ["/usr/b"]


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"version": "0.1.0"}, "version: expected '1.0.0', got '0.1.0'"),
        ({"hook": {"path": "rel"}}, "hook.path: expected an absolute path"),
        ({"hook": {"path": "/h", "timeout": 0}}, "hook.timeout: expected a positive number"),
        ({"hook": {"path": "/h", "env": ["NOEQUALS"]}}, "hook.env: 'NOEQUALS' is not KEY=VALUE"),
        ({"hook": {"path": "/h", "argv": []}}, "hook: unknown key 'argv'"),
        ({"when": {}}, "when: needs at least one of always, annotations, commands"),
        ({"when": {"commands": ["("]}}, "when.commands[0]: invalid regular expression '('"),
        ({"when": {"always": "yes"}}, "when.always: expected true or false"),
        ({"stages": []}, "stages: expected at least one stage"),
        ({"stages": ["prestart", "onStart"]}, "stages: unknown stage 'onStart'"),
    ],
)
def test_bad_hook_files(doc: dict[str, Any], message: str) -> None:
    full = {"version": "1.0.0", "hook": {"path": "/h"}, "when": {"always": True},
            "stages": ["prestart"], **doc}  # fmt: skip
    with pytest.raises(HookFileError) as info:
        parse_hook_file("x.json", json.dumps(full))
    assert message in str(info.value)


def test_configuration(tmp_path: Path, policy_runner: RunnerFactory) -> None:
    with pytest.raises(PolicyConfigError, match=r"hooks_dirs\[0\]: expected an absolute path"):
        policy_runner(builtin="hook-injector", config={"hooks_dirs": ["relative"]})
    with pytest.raises(PolicyConfigError, match=r"hooks_dirs\[0\]: contains a NUL byte"):
        policy_runner(builtin="hook-injector", config={"hooks_dirs": ["/a\0b"]})
    with pytest.raises(PolicyConfigError, match="hooks_dir: unknown key"):
        policy_runner(builtin="hook-injector", config={"hooks_dir": "/x"})
    relative = tmp_path / "hooks.yaml"
    relative.write_text("hooks_dirs: [d]\n")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "h.json").write_text(hook_file({"always": True}))
    runner = policy_runner(builtin="hook-injector", config=relative)  # d is next to the file
    assert runner.send(make_request("CreateContainer")).adjust == {
        "hooks": {"prestart": [{"path": "/bin/h"}]}}
