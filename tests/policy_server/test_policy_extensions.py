"""Issue 26: the server knows policies only through the SDK. Extension points registered by
decorator, built-ins chosen by ``--policy NAME[=CONFIG]`` with ``--rules`` and
``--no-koordinator`` as aliases, koordinator-qos's state page, and an import contract that
lists every built-in."""

from __future__ import annotations

import asyncio
import configparser
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from policy_server import NO_PLAN, Policy, PolicyHost
from policy_server.assemble import assemble
from policy_server.exceptions import PolicyLoadError
from policy_server.policies import CATALOGUE, DEFAULT_POLICY, enabled_builtins
from policy_server.service import PolicyServer, ServerOptions

ROOT = Path(__file__).parents[2]
RULES = ROOT / "examples" / "koordinator-rules.yaml"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "policy_server.main", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)  # fmt: skip


def test_an_extension_point_is_registered_once() -> None:
    policy = Policy("twice")
    assert policy.extensions.reconcile is None
    policy.reconcile(lambda event: NO_PLAN)
    assert policy.extensions.reconcile is not None
    with pytest.raises(PolicyLoadError, match="policy twice: a second reconcile hook"):
        policy.reconcile(lambda event: NO_PLAN)


def test_which_builtins_are_served() -> None:
    ulimit = ("ulimit-adjuster", None)
    assert enabled_builtins([]) == ((DEFAULT_POLICY, None),)
    assert enabled_builtins([ulimit], RULES) == ((DEFAULT_POLICY, RULES), ulimit)
    assert enabled_builtins([ulimit], default=False) == (ulimit,)
    # --rules FILE is --policy koordinator-qos=FILE: an explicit request, also without default.
    assert enabled_builtins([ulimit], RULES, default=False) == ((DEFAULT_POLICY, RULES), ulimit)
    # Named explicitly: in its place, with --rules as its configuration, even without default.
    assert enabled_builtins([ulimit, (DEFAULT_POLICY, None)], RULES, default=False) == (
        ulimit, (DEFAULT_POLICY, RULES))
    with pytest.raises(PolicyLoadError, match="give it once"):
        enabled_builtins([(DEFAULT_POLICY, RULES)], RULES)
    with pytest.raises(PolicyLoadError, match="--policy ulimit-adjuster given twice"):
        enabled_builtins([ulimit, ulimit])


@pytest.mark.processes
def test_bad_policy_arguments_exit_2_with_the_reason(tmp_path: Path) -> None:
    sock = str(tmp_path / "s.sock")
    for args, message in (
        (["--policy", "nope"], "no built-in policy named 'nope' (known: cel, cpu-pools, "),
        (["--policy", "koordinator-qos="], "expected NAME or NAME=CONFIG_FILE"),
        (["--policy", f"koordinator-qos={tmp_path / 'missing.yaml'}"],
         f"cannot read rules file {tmp_path / 'missing.yaml'}"),
        (["--policy", f"koordinator-qos={RULES}", "--rules", str(RULES)], "give it once"),
    ):  # fmt: skip
        run = cli("--uds", sock, *args)
        assert run.returncode == 2, (args, run.stderr)
        assert run.stderr.startswith("nri-policy-server: ") and message in run.stderr, run.stderr
    assert not Path(sock).exists()


@pytest.mark.processes
def test_koordinator_is_listed_and_checked_like_any_builtin() -> None:
    listed = cli("--list-policies")
    assert listed.returncode == 0
    assert [line.split()[0] for line in listed.stdout.splitlines()] == sorted(CATALOGUE)
    checked = cli("--check-policies", "--policy", f"koordinator-qos={RULES}")
    assert checked.returncode == 0 and checked.stdout == f"ok koordinator-qos ({RULES})\n"


async def test_the_rules_alias_and_the_state_page_agree() -> None:
    by_alias = assemble(ServerOptions(rules_path=RULES))
    by_name = assemble(ServerOptions(default_policies=False,
                                     builtin_policies=((DEFAULT_POLICY, RULES),)))  # fmt: skip
    pages = []
    for assembly in (by_alias, by_name):
        assert [p.name for p in assembly.server.registry] == [DEFAULT_POLICY]
        transport = httpx.ASGITransport(app=assembly.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://p") as client:
            state = (await client.get(f"/v1/policies/{DEFAULT_POLICY}/state")).json()
            assert (await client.get("/v1/rules")).json() == state
            health = (await client.get("/healthz")).json()
        assert health["rules"] == {"file": str(RULES), "generation": 1, "last_error": None}
        pages.append(state)
    assert pages[0] == pages[1]
    assert pages[0]["rules"]["cpu_normalization_ratio"] == 1.2


async def test_without_the_rules_policy_its_pages_say_so() -> None:
    assembly = assemble(ServerOptions(default_policies=False), extra_policies=[Policy("plain")])
    transport = httpx.ASGITransport(app=assembly.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://p") as client:
        assert (await client.get("/v1/rules")).status_code == 404
        no_state = await client.get("/v1/policies/plain/state")
        health = (await client.get("/healthz")).json()
    assert no_state.status_code == 404 and "describes no state" in no_state.json()["detail"]
    assert health["rules"] == {"file": None, "generation": 0, "last_error": None}
    # As before the move: nothing invalid is in force (no false alert on this gauge).
    assert "policy_rules_last_load_valid 1.0" in assembly.server.metrics.render().decode()


def test_the_framework_contract_names_every_builtin() -> None:
    """A new built-in must be added to the contract that keeps the framework off policies."""
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    contract = config["importlinter:contract:framework-imports-no-policy"]
    forbidden = set(contract["forbidden_modules"].split())
    assert forbidden == set(CATALOGUE.values())
    sources = set(contract["source_modules"].split())
    assert {"policy_server.main", "policy_server.http_edge", "policy_server.engine",
            "policy_server.node", "policy_server.service"} <= sources  # fmt: skip


async def test_a_failing_background_task_ends_only_itself(
        caplog: pytest.LogCaptureFixture) -> None:
    broken, steady = Policy("broken"), Policy("steady")
    ran = asyncio.Event()
    ticks: list[float] = []

    @broken.background
    async def crash(host: PolicyHost) -> None:
        raise RuntimeError("boom")

    @steady.background
    async def poll(host: PolicyHost) -> None:
        while not await host.stopped(0.01):
            ticks.append(host.poll_interval_s)
            ran.set()

    server = PolicyServer(ServerOptions(default_policies=False, rules_poll_interval_s=0.5),
                          [broken, steady])  # fmt: skip
    stop = asyncio.Event()
    task = asyncio.create_task(server.run_background(stop))
    await asyncio.wait_for(ran.wait(), 10)  # the steady task runs although its sibling failed
    stop.set()
    await asyncio.wait_for(task, 10)  # and stops when the server does
    assert ticks and set(ticks) == {0.5}
    [failed] = [r for r in caplog.records if "background task of policy" in r.getMessage()]
    assert "policy broken failed" in failed.getMessage() and failed.exc_info is not None
