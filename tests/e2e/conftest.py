"""pytest fixtures for the real-containerd e2e tests.

Owns: one private containerd per runtime version per test module (parametrized over
RUNTIMES; set up and torn down by private_containerd.py, which the as-shipped and node-v2
fixtures share), a CRI client for it, per-test pod clean-up, and the policy tests' stack (a
policy server plus a webhook-configured bridge, ``start_stack``). Logs of every instance are
copied to ``.e2e/logs/`` (git-ignored) so a failed CI run can be read afterwards.

Must not: skip silently. A missing runtime or image is a test failure that says to
run ``tests/e2e/setup/install-runtimes.sh``.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .bridge_proc import LogLine, has_msg
from .containerd import Containerd
from .cri import CriClient, Pod
from .policy_proc import PolicyServer, WebhookBridge
from .private_containerd import keep_log, private_containerd, serving_cri
from .runtimes import RUNTIMES, Runtime


@pytest.fixture(scope="module", params=RUNTIMES, ids=lambda r: f"containerd-{r.version}")
def containerd(request: pytest.FixtureRequest) -> Iterator[Containerd]:
    runtime: Runtime = request.param
    module = request.module.__name__.rsplit(".", 1)[-1]
    with private_containerd(runtime, prefix=f"nri-e2e-{runtime.version}-",
                            log_name=f"{module}-containerd-{runtime.version}.log") as instance:
        yield instance


@pytest.fixture(scope="module")
def cri(containerd: Containerd) -> Iterator[CriClient]:
    with serving_cri(CriClient(containerd.dirs.address)) as client:
        yield client


@pytest.fixture
def clean_pods(containerd: Containerd, cri: CriClient) -> Iterator[CriClient]:
    """The CRI client; every pod the test made is stopped and removed afterwards."""
    yield cri
    if containerd.running():
        cri.remove_all()


# --- a policy server and a webhook bridge (the policy e2e tests) ---------------------------


@dataclass
class Stack:
    policy: PolicyServer
    bridge: WebhookBridge


StackFactory = Callable[..., Stack]


@pytest.fixture
def start_stack(
    containerd: Containerd, cri: CriClient, request: pytest.FixtureRequest
) -> Iterator[StackFactory]:
    """Start a policy server and a webhook bridge; stop both (by PID) after the test.

    Pods are removed while both still run, so teardown events take the real path too.
    """
    started: list[Stack] = []

    def start(
        webhooks: list[dict[str, Any]],
        rules: dict[str, Any] | None = None,
        policy_modules: tuple[Path, ...] = (),
        koordinator: bool = True,
        builtin_policies: tuple[str, ...] = (),
        policy_args: tuple[str, ...] = (),
    ) -> Stack:
        workdir = Path(tempfile.mkdtemp(prefix="policy-", dir=containerd.dirs.base))
        # The bridge object first: the policy server needs its control socket path.
        policy_sock = workdir / "policy.sock"
        hooks = [
            {**hook, "url": f"unix://{policy_sock}/v1/policies/{hook['name']}"} for hook in webhooks
        ]
        bridge = WebhookBridge(containerd.dirs.nri_socket, workdir / "bridge", hooks)
        policy = PolicyServer(
            workdir,
            rules=rules,
            policy_modules=policy_modules,
            koordinator=koordinator,
            builtin_policies=builtin_policies,
            bridge_control=bridge.control_socket,
            extra_args=policy_args,
        )
        assert policy.socket == policy_sock
        stack = Stack(policy, bridge)
        started.append(stack)
        policy.start()
        policy.wait_healthy()
        bridge.start()
        bridge.wait_for("registration", has_msg("registered"))
        bridge.wait_ready()
        return stack

    yield start
    try:
        if containerd.running():
            cri.remove_all()
    finally:
        for i, stack in enumerate(started):
            name = request.node.name.replace("/", "_")
            for proc in (stack.bridge, stack.policy):
                with contextlib.suppress(Exception):  # keep stopping the others
                    proc.stop()
            keep_log(stack.bridge.log, f"{name}-bridge{i}.log")
            keep_log(stack.policy.log, f"{name}-policy{i}.log")


def webhook_call(webhook: str, event: str, pod: Pod, container: str) -> Callable[[LogLine], bool]:
    """The bridge's per-webhook log line (``msg: webhook call``) for one container's event.

    It names the pod (``namespace/name``) and the container name, not the container id.
    """
    pod_ref = f"{pod.config.metadata.namespace}/{pod.config.metadata.name}"

    def match(line: LogLine) -> bool:
        return (
            line.get("msg") == "webhook call"
            and line.get("webhook") == webhook
            and line.get("event") == event
            and line.get("pod") == pod_ref
            and line.get("container") == container
        )

    return match


def outcome_of(stack: Stack, webhook: str, event: str, pod: Pod, container: str = "app") -> str:
    line = stack.bridge.wait_for(
        f"{webhook} {event} call for {pod.config.metadata.name}/{container}",
        webhook_call(webhook, event, pod, container),
    )
    return str(line.get("outcome"))
