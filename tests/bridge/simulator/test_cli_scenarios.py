"""Scenario loading, bench mode and the `simulate` CLI (in-process, real socket)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bridge.nri.handler_api import EventContext, EventRejected, Handler
from bridge.nri.runner import PluginRunner
from bridge.nri.session import PluginIdentity
from bridge.nri.stub import new_plugin
from bridge.proto.nri import api_pb2 as api
from bridge.simulator import ScenarioError, load_scenario, run_bench
from bridge.simulator import commands as sim_cli
from bridge.simulator.bench import percentile
from bridge.simulator.scenario import (
    EventStep,
    SleepStep,
    bundled_scenarios,
    parse_scenario,
    profile_named_by,
)

from .harness import FAST_BACKOFF, assert_no_leaked_tasks, connected


class Adjusting(Handler):
    async def create_container(self, ctx: EventContext, req: Any) -> api.CreateContainerResponse:
        rsp = api.CreateContainerResponse()
        rsp.adjust.env.add(key="FROM_BRIDGE", value="1")
        rsp.adjust.linux.resources.cpu.shares.value = 512
        return rsp


class RejectAll(Handler):
    async def create_container(self, ctx: EventContext, req: Any) -> None:
        raise EventRejected("nope")


def test_bundled_scenarios_load() -> None:
    names = bundled_scenarios()
    assert {"koordinator-qos.json", "pod-resize-v0.12.json", "batch-job-sidecar-1.7.json",
            "containerd-1.7.24-events.jsonl", "containerd-2.1.9-wire.jsonl"} <= set(names)
    for name in names:
        scenario = load_scenario(name)
        assert scenario.events, name
    assert load_scenario("containerd-1.7.24-events").profile == "containerd-1.7.24"
    # The beta's recordings are the beta's, though they start with "containerd-2.4.0" too.
    for kind in ("wire", "wire-legacy-plugin"):
        assert load_scenario(f"containerd-2.4.0-beta.0-{kind}").profile == \
            "containerd-2.4.0-beta.0"
    wire, events = (load_scenario(f"containerd-2.1.9-{kind}.jsonl") for kind in ("wire", "events"))
    assert [s.event for s in wire.events] == [s.event for s in events.events]
    koord = load_scenario("koordinator-qos")
    labels = {step.pod.labels["koordinator.sh/qosClass"] for step in koord.events}
    assert labels == {"LSR", "LS", "BE"}
    assert any(isinstance(s, SleepStep) for s in koord.steps)


def test_a_recording_s_profile_is_the_longest_name_it_starts_with() -> None:
    keys = ["containerd-2.4.0", "containerd-2.4.0-beta.0", "containerd-2.3.4"]
    for order in (keys, keys[::-1]):
        assert profile_named_by("containerd-2.4.0-beta.0-wire", order) == \
            "containerd-2.4.0-beta.0"
        assert profile_named_by("containerd-2.4.0-wire", order) == "containerd-2.4.0"
    assert profile_named_by("crio-1.37-wire", keys) is None


def test_scenario_errors_are_precise(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="unknown event 'Explode'"):
        parse_scenario({"steps": [{"event": "Explode"}]})
    with pytest.raises(ScenarioError, match=r"steps\[0\].*contaner"):
        parse_scenario({"steps": [{"event": "CreateContainer", "contaner": {}}]})
    with pytest.raises(ScenarioError, match="sleep step"):
        parse_scenario({"steps": [{"sleep_ms": -1}]})
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"event": "RunPodSandbox", "pod": {}}\n{not json\n')
    with pytest.raises(ScenarioError, match=r"bad.jsonl:2: invalid JSON"):
        load_scenario(bad)
    with pytest.raises(ScenarioError, match="no scenario"):
        load_scenario("does-not-exist")
    step = parse_scenario({"steps": [{"event": "UpdateContainer", "pod": {"id": "p"},
                                      "linux_resources": {"cpu": {"shares": {"value": "5"}}}}]})
    [only] = step.steps
    assert isinstance(only, EventStep)
    assert only.request.linux_resources.cpu.shares.value == 5  # type: ignore[attr-defined]


def test_percentile_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 50), percentile(values, 99), percentile(values, 100)) == (
        50.0, 99.0, 100.0)
    assert percentile([], 50) == 0.0


@pytest.mark.timeout(10)
async def test_run_bench(sock_path: Path) -> None:
    async with connected(sock_path, Adjusting()) as h:
        bench = await run_bench(h.runtime, 200, warmup=20)
        assert bench.events == 200 and bench.errors == 0
        for stats in (bench.round_trip, bench.operation):
            assert 0 < stats.min_s <= stats.p50_s <= stats.p90_s <= stats.p99_s <= stats.max_s
        assert bench.round_trip.p50_s < bench.operation.p50_s  # the RPC is part of the op
        assert bench.events_per_s > 0
        assert h.runtime.state.containers == {}  # bench keeps the runtime state steady
        parallel = await run_bench(h.runtime, 100, concurrency=4)
        assert parallel.events == 100 and parallel.errors == 0


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    sim_cli.add_arguments(parser)
    return parser.parse_args(list(argv))


@contextlib.asynccontextmanager
async def plugin(path: Path, handler: Handler) -> AsyncIterator[PluginRunner]:
    runner = new_plugin(PluginIdentity("cli", "20"), handler, socket_path=str(path),
                          backoff=FAST_BACKOFF)
    task = asyncio.create_task(runner.run())
    try:
        yield runner
    finally:
        await runner.stop(grace_s=0.1)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@pytest.mark.timeout(10)
async def test_cli_bench_json(sock_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    async with plugin(sock_path, Adjusting()):
        code = await sim_cli.main(parse("--socket", str(sock_path), "--bench", "100", "--json",
                                        "--wait-plugin-s", "5", "--sync-pods", "2",
                                        "--sync-containers", "5"))
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["exit_code"] == 0
    assert out["bench"]["events"] == 100 and out["bench"]["errors"] == 0
    assert set(out["bench"]["latency_us"]) == {"min", "p50", "p90", "p99", "max"}
    assert set(out["bench"]["operation_us"]) == {"min", "p50", "p90", "p99", "max"}
    assert out["plugin"]["name"] == "20-cli" and out["plugin"]["sync_objects"] == [2, 5]
    await assert_no_leaked_tasks()


@pytest.mark.timeout(10)
async def test_cli_scenario_human(sock_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    async with plugin(sock_path, Adjusting()):
        code = await sim_cli.main(parse("--socket", str(sock_path), "--scenario",
                                        "pod-resize-v0.12", "--hostile", "--wait-plugin-s", "5"))
    out = capsys.readouterr().out
    assert code == 0, out
    assert "plugin 20-cli registered" in out
    assert "UNEXPECTED" not in out and "hostile unknown-method" in out
    create = next(line for line in out.splitlines() if "CreateContainer" in line)
    assert "shop/api-ls-5b8d7c6f4-m9q2w/api" in create
    assert "env FROM_BRIDGE=1" in create and "cpu.shares=512" in create
    assert "UpdatePodSandbox" in out  # a v0.12-only event, from the scenario's profile


@pytest.mark.timeout(10)
async def test_cli_reports_failures_with_exit_1(sock_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    async with plugin(sock_path, RejectAll()):
        code = await sim_cli.main(parse("--socket", str(sock_path), "--scenario",
                                        "containerd-1.7.24-events.jsonl", "--json"))
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    errors = [r for r in out["results"] if r["error"]]
    assert [r["event"] for r in errors] == ["CreateContainer"]
    assert errors[0]["error"] == "plugin 20-cli: nope"


@pytest.mark.timeout(10)
async def test_cli_no_plugin_and_usage_errors(sock_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert await sim_cli.main(parse("--socket", str(sock_path), "--wait-plugin-s", "0.1")) == 1
    assert "no plugin registered" in capsys.readouterr().out
    assert await sim_cli.main(parse("--bench", "0")) == 2
    assert await sim_cli.main(parse("--scenario", "no-such-scenario")) == 2
    assert "no scenario" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse("--bench", "5", "--scenario", "x")  # the modes are exclusive
