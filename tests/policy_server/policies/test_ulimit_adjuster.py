"""ulimit-adjuster, tested with the policy test kit (policy_server.testing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from policy_server.policies import PolicyConfigError
from policy_server.testing import make_request
from policy_server.testing.plugin import RunnerFactory

ROOT = Path(__file__).parents[3]
REQUESTS = ROOT / "examples" / "requests"
CONFIG = ROOT / "examples" / "policies" / "ulimit-adjuster.yaml"
KEY = "ulimits.noderesource.dev/container.app"
UNLIMITED = 2**64 - 1


def test_shipped_fixtures_with_the_shipped_config(policy_runner: RunnerFactory) -> None:
    runner = policy_runner(builtin="ulimit-adjuster", config=CONFIG)
    reply = runner.send(REQUESTS / "ulimit-create-nofile.json")
    assert reply.adjust == {"rlimits": [
        {"type": "RLIMIT_NOFILE", "soft": 4096, "hard": 65536},
        {"type": "RLIMIT_MEMLOCK", "soft": UNLIMITED, "hard": UNLIMITED},
    ]}  # fmt: skip
    over = runner.send(REQUESTS / "ulimit-create-over-max.json")
    assert over.reject == (
        "rlimits: annotation ulimits.noderesource.dev/pod: RLIMIT_NOFILE: hard limit 4194304 "
        "exceeds this node's maximum 1048576"
    )
    assert "adjust" not in over.json


def test_container_annotation_wins_over_the_pod_one(policy_runner: RunnerFactory) -> None:
    runner = policy_runner(builtin="ulimit-adjuster", config={"max": {"nproc": 100, "core": 0}})
    both = {KEY: "[{type: nproc, hard: 100}]",
            "ulimits.noderesource.dev/pod": "[{type: core, hard: 0}]"}  # fmt: skip
    reply = runner.send(make_request("CreateContainer", pod_annotations=both))
    assert reply.adjust == {"rlimits": [{"type": "RLIMIT_NPROC", "soft": 100, "hard": 100}]}
    other = make_request("CreateContainer", pod_annotations=both,
                         container={"id": "c2", "name": "sidecar"})  # fmt: skip
    assert runner.send(other).adjust == {"rlimits": [{"type": "RLIMIT_CORE", "soft": 0, "hard": 0}]}
    assert runner.send(make_request("CreateContainer")).json == {}


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("[{type: nofile, soft: 10, hard: 5}]", "RLIMIT_NOFILE: soft limit 10 exceeds hard 5"),
        ("[{type: files, hard: 5}]", "item 0: unknown rlimit type 'files' (known: as, core,"),
        ("[{type: nofile, soft: 5}]", "item 0 (RLIMIT_NOFILE): hard is required"),
        ("[{type: nofile, hard: many}]", "(RLIMIT_NOFILE).hard: expected a non-negative integer"),
        ("[{type: nofile, hard: 5, extra: 1}]", "item 0: unknown field 'extra'"),
        ("[{type: nofile, hard: 5}, {type: NOFILE, hard: 6}]", "RLIMIT_NOFILE is given twice"),
        ("{type: [nofile", "not valid YAML (line 1, column"),
        ("[]", "expected a non-empty list, got a list"),
        ("42", "expected a non-empty list, got the number 42"),
    ],
)
def test_bad_annotations_reject_with_a_reason(
    policy_runner: RunnerFactory, value: str, reason: str
) -> None:
    reply = policy_runner(builtin="ulimit-adjuster", config={"max": {"nofile": 100}}).send(
        make_request("CreateContainer", pod_annotations={KEY: value})
    )
    assert reply.reject is not None and reply.reject.startswith(f"rlimits: annotation {KEY}: ")
    assert reason in reply.reject, reply.reject


def _request(annotations: dict[str, str], namespace: str = "default",
             rlimits: list[dict[str, int | str]] | None = None) -> dict[str, object]:
    container: dict[str, object] = {"id": "ctr-1", "pod_sandbox_id": "pod-1", "name": "app"}
    if rlimits is not None:
        container["rlimits"] = rlimits
    return make_request("CreateContainer", pod_annotations=annotations, container=container,
                        pod={"id": "pod-1", "name": "pod", "namespace": namespace})  # fmt: skip


RUNTIME_NOFILE: list[dict[str, int | str]] = [{"type": "RLIMIT_NOFILE", "soft": 1024, "hard": 4096}]


def test_without_a_cap_a_limit_is_only_lowered_below_the_runtimes(
    policy_runner: RunnerFactory,
) -> None:
    runner = policy_runner(builtin="ulimit-adjuster")
    lower = runner.send(_request({KEY: "[{type: nofile, hard: 2048}]"}, rlimits=RUNTIME_NOFILE))
    assert lower.adjust == {"rlimits": [{"type": "RLIMIT_NOFILE", "soft": 2048, "hard": 2048}]}
    same = runner.send(_request({KEY: "[{type: nofile, hard: 4096}]"}, rlimits=RUNTIME_NOFILE))
    assert same.reject is None
    for value, reason in [
        ("[{type: nofile, hard: 4097}]", "hard limit 4097 raises the runtime's 4096 default"),
        ("[{type: nofile, hard: unlimited}]", "hard limit unlimited raises the runtime's 4096"),
        # A limit the runtime did not set: nothing to lower, so only with a cap.
        ("[{type: memlock, hard: unlimited}]", "raises the runtime's default and this node "
                                               "sets no maximum for it (max.memlock)"),
        ("[{type: rtprio, hard: 99}]", "(max.rtprio)"),
    ]:
        reply = runner.send(_request({KEY: value}, rlimits=RUNTIME_NOFILE))
        assert reply.reject is not None and reason in reply.reject, (value, reply.json)
        assert "adjust" not in reply.json
    # A cap lets an annotation raise up to it, above the runtime's.
    capped = policy_runner(builtin="ulimit-adjuster", config={"max": {"nofile": 65536,
                                                                      "memlock": "unlimited"}})
    assert capped.send(_request({KEY: "[{type: nofile, hard: 65536}]"},
                                rlimits=RUNTIME_NOFILE)).reject is None  # fmt: skip
    assert capped.send(_request({KEY: "[{type: memlock, hard: unlimited}]"})).reject is None
    assert "exceeds this node's maximum 65536" in str(
        capped.send(_request({KEY: "[{type: nofile, hard: 65537}]"})).reject
    )


def test_namespaces_limit_which_pods_may_ask(policy_runner: RunnerFactory) -> None:
    runner = policy_runner(builtin="ulimit-adjuster",
                           config={"max": {"nofile": 65536}, "namespaces": ["databases"]})
    asked = {KEY: "[{type: nofile, hard: 8192}]"}
    assert runner.send(_request(asked, "databases")).adjust
    outside = runner.send(_request(asked, "team-a"))
    assert outside.reject == (
        f"rlimits: annotation {KEY}: rlimits from annotations are not granted to pods of "
        "namespace 'team-a' on this node (the policy's namespaces)"
    )
    # Every namespace by default: the caps bound what any pod may raise.
    default = policy_runner(builtin="ulimit-adjuster", config={"max": {"nofile": 65536}})
    assert default.send(_request(asked, "team-a")).adjust


def test_other_events_are_not_handled(policy_runner: RunnerFactory) -> None:
    runner = policy_runner(builtin="ulimit-adjuster")
    annotated = {KEY: "[{type: nofile, hard: 5}]"}
    for event in ("RunPodSandbox", "UpdateContainer", "RemoveContainer"):
        assert runner.send(make_request(event, pod_annotations=annotated)).json == {}


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"max": {"files": 5}}, "max.files: unknown rlimit type"),
        ({"max": {"nofile": -1}},
         "max.nofile: expected a non-negative integer or unlimited, got -1"),
        ({"max": {"nofile": "lots"}}, "max.nofile: expected a non-negative integer or unlimited"),
        ({"maximum": {}}, "maximum: unknown key (known: max, namespaces)"),
        ({"namespaces": "default"}, "namespaces: expected a list of strings"),
        ({"max": [1]}, "max: expected a mapping, got a list"),
    ],
)
def test_bad_configuration_is_refused(
    policy_runner: RunnerFactory, config: dict[str, object], message: str
) -> None:
    with pytest.raises(PolicyConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        policy_runner(builtin="ulimit-adjuster", config=config)
