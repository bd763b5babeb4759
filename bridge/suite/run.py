"""Running loaded suites on `try`'s engine: each case one trial, its expectations checked.

Owns: per suite, the webhooks under test — the configuration as given, or a private policy
server (bridge.trial.private_server) started on first use, one per cgroup version the cases
ask for (what the policies are told about the node), stopped when the suite ends — and per
case one trial (bridge.trial.play.TrialBridge: the real bridge, one process for the cases
that share webhooks, and a fresh runtime simulator per case), its
results (bridge.trial.report.results) checked against the expectations (bridge.suite.expect).
A webhook call that failed makes the case fail whatever the expectations say: a policy that
cannot be reached passes nothing.
Must not: print, or decide exit codes (bridge.suite.suite_command).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bridge.config_file import BridgeConfig, parse
from bridge.errors import ConfigError
from bridge.suite.expect import Mismatch, check_expectation
from bridge.suite.load import LoadedCase, LoadedSuite
from bridge.suite.problems import SuiteError
from bridge.trial import report
from bridge.trial.play import TrialBridge, TrialError, TrialResult
from bridge.trial.private_server import PolicySetupError, private_server


@dataclass(frozen=True, slots=True)
class CaseResult:
    suite: LoadedSuite
    name: str
    mismatches: tuple[Mismatch, ...] = ()
    error: str | None = None  # the case could not run, or webhook calls failed (a line each)
    duration_s: float = 0.0
    objects: tuple[dict[str, Any], ...] = ()  # what `try --output json` says of the case
    webhooks: tuple[str, ...] = ()  # the names of the webhooks under test
    calls_failed: bool = False  # a webhook call failed (the error says which): exit 3

    @property
    def ok(self) -> bool:
        return self.error is None and not self.mismatches


Webhooks = tuple[BridgeConfig, dict[str, Any]]


async def run_suite(suite: LoadedSuite,
                    done: Callable[[CaseResult], None] = lambda _: None) -> list[CaseResult]:
    """Every case of `suite`, in order, each given to `done` as it ends. SuiteError when its
    private server refuses to start."""
    async with contextlib.AsyncExitStack() as stack:
        servers: dict[tuple[int, int, int, int], Webhooks] = {}
        # Every private server first: the names of the webhooks it serves are checked against
        # the expectations before any case runs (a misspelt one would hold vacuously).
        for case in suite.cases:
            await _webhooks(stack, suite, case, servers)
        if suite.target.private is not None:
            suite.check_webhooks(sorted({w.name for config, _ in servers.values()
                                         for w in config.webhooks}))
        bridges = await _bridges(stack, [await _webhooks(stack, suite, case, servers)
                                         for case in suite.cases])
        results = []
        for case in suite.cases:
            hooks = await _webhooks(stack, suite, case, servers)
            started = time.monotonic()
            try:
                bridge = bridges[id(hooks[1])]
                if isinstance(bridge, TrialError):
                    raise bridge
                trial = await bridge.trial(list(case.pods), case.profile, case.resizes,
                                           case.node)
            except TrialError as exc:
                result = CaseResult(suite, case.name, error=str(exc))
            else:
                result = judge(suite, case, trial)
            results.append(replace(result, duration_s=time.monotonic() - started,
                                   webhooks=tuple(w.name for w in hooks[0].webhooks)))
            done(results[-1])
        return results


async def _bridges(stack: contextlib.AsyncExitStack, hooks: list[Webhooks],
                   ) -> dict[int, TrialBridge | TrialError]:
    """A bridge per webhook configuration the cases use (by the document's identity), their
    processes started side by side before the first case: the start is the suite's set-up,
    as the private server's is. A bridge that cannot start is the error of its cases."""
    distinct = {id(document): (config, document) for config, document in hooks}
    bridges = {key: TrialBridge(*pair) for key, pair in distinct.items()}
    entered = await asyncio.gather(*(b.__aenter__() for b in bridges.values()),
                                   return_exceptions=True)
    out: dict[int, TrialBridge | TrialError] = {}
    unexpected: BaseException | None = None
    for (key, bridge), outcome in zip(bridges.items(), entered, strict=True):
        if isinstance(outcome, TrialError):
            out[key] = outcome
        elif isinstance(outcome, BaseException):
            unexpected = unexpected or outcome
        else:  # started: stopped with the suite, whatever happens next
            stack.push_async_exit(bridge.__aexit__)
            out[key] = bridge
    if unexpected is not None:
        raise unexpected
    return out


def judge(suite: LoadedSuite, case: LoadedCase, trial: TrialResult) -> CaseResult:
    failed: dict[tuple[str, str], list[str]] = {}  # (webhook, error) -> events, in order
    for ex in trial.exchanges:
        if ex.error is not None:
            events = failed.setdefault((ex.webhook, ex.error), [])
            if ex.event not in events:
                events.append(ex.event)
    errors = [f"webhook {webhook}: call failed ({', '.join(events)}): {error}"
              for (webhook, error), events in failed.items()]
    objects = report.results(trial)
    mismatches = tuple(m for e in case.expect for m in check_expectation(e, objects))
    return CaseResult(suite, case.name, mismatches, "\n".join(errors) or None,
                      objects=tuple(objects), calls_failed=bool(errors))


async def _webhooks(stack: contextlib.AsyncExitStack, suite: LoadedSuite, case: LoadedCase,
                    servers: dict[tuple[int, int, int, int], Webhooks]) -> Webhooks:
    target = suite.target
    if target.private is None:
        assert target.config is not None and target.document is not None
        return target.config, target.document
    # One private server per node the cases describe: it reads the node's topology at start.
    key = (case.cgroup_version, case.node.cpus, case.node.numa_nodes, case.node.memory_bytes)
    if key not in servers:
        work = Path(tempfile.mkdtemp(prefix="nri-test-policy-"))  # mode 0700
        stack.callback(shutil.rmtree, work, True)
        private = replace(target.private, cgroup_version=case.cgroup_version, node=case.node)
        field = ("webhooks.policy_modules" if private.modules else
                 "webhooks.rules" if private.rules else "webhooks.policies")
        try:
            document = await stack.enter_async_context(private_server(private, work))
            config = parse(document, field)
        except (PolicySetupError, ConfigError) as exc:
            raise SuiteError(suite.path, field, str(exc)) from None
        if not config.webhooks:
            raise SuiteError(suite.path, field, "no policy handles any event")
        servers[key] = config, document
    return servers[key]
