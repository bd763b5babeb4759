"""`make demo`: the policy server, the bridge and the runtime simulator, end to end.

Starts `nri-policy-server` (koordinator-qos rules) and `nri-webhook-bridge` as real
processes in a private temporary directory, plays a koordinator-style node through
the runtime simulator over the real NRI protocol, prints one table row per event
(event -> webhook -> decision -> adjustment), then edits the rules file to show a
rule change reaching running containers (through CRI UpdateContainerResources, as the
simulated containerd 2.1.9 can deadlock on NRI UpdateContainers). The policy server's node
effects go to empty fake cgroup, proc and resctrl roots in the work directory, without the
system bus: the demo never touches the machine's node. Everything it started is
stopped before it exits; exit code 0 means every step behaved.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import yaml

from bridge.contract.convert import to_json
from bridge.contract.cpu_list_grammar import format_cpu_list
from bridge.kube.node import NodeSpec
from bridge.proto.nri import api_pb2 as api
from bridge.simulator import PROFILES, EventResult, SimulatedRuntime, load_scenario, run_scenario
from bridge.simulator.cri_server import serve_cri
from bridge.trial.node_root import write_node

REPO = Path(__file__).resolve().parents[1]
RULES_EXAMPLE = REPO / "examples" / "koordinator-rules.yaml"
SCENARIO = "koordinator-qos.json"
STARTUP_TIMEOUT_S = 20.0
BIN = Path(sys.executable).parent

BRIDGE_CONFIG = """\
webhooks:
  - name: koordinator-qos
    url: unix://{sock}/v1/policies/koordinator-qos
    events: [RunPodSandbox, CreateContainer, UpdateContainer, RemoveContainer, Synchronize]
    timeout: 500ms
    failure_policy: Ignore
node:
  sysfs_root: {sysfs}  # the demo node's: replies are checked against its CPUs
"""

BOLD, DIM, GREEN, YELLOW, RED, RESET = (
    ("\033[1m", "\033[2m", "\033[32m", "\033[33m", "\033[31m", "\033[0m")
    if sys.stdout.isatty() else ("",) * 6)


# -- presenting results ------------------------------------------------------------------


def _resources(res: dict[str, Any]) -> list[str]:
    parts = []
    cpu, mem = res.get("cpu", {}), res.get("memory", {})
    for key, label in (("cpus", "cpuset"), ("shares", "cpu.shares"), ("quota", "cfs_quota")):
        if key in cpu:
            parts.append(f"{label}={cpu[key]}")
    if "limit" in mem:
        parts.append(f"mem.limit={_bytes(mem['limit'])}")
    parts += [f"{k}={v}" for k, v in res.get("unified", {}).items()]
    if "rdt_class" in res:
        parts.append(f"rdt={res['rdt_class']}")
    return parts


def _bytes(value: int) -> str:
    for unit, size in (("Gi", 1 << 30), ("Mi", 1 << 20)):
        if value > 0 and value % size == 0:
            return f"{value // size}{unit}"
    return str(value)


def describe_result(result: EventResult) -> tuple[str, str]:
    """(decision, adjustment summary) for one event."""
    if result.error:
        return f"{RED}failed{RESET}", result.error[:70]
    response = result.response
    parts: list[str] = []
    if isinstance(response, api.CreateContainerResponse) and response.HasField("adjust"):
        adjust = to_json(response.adjust)
        parts += [f"env {e['key']}={e.get('value', '')}" for e in adjust.get("env", [])]
        linux = adjust.get("linux", {})
        parts += _resources(linux.get("resources", {}))
        if "oom_score_adj" in linux:
            parts.append(f"oom_score_adj={linux['oom_score_adj']}")
    updates = getattr(response, "update", ()) if response is not None else ()
    for update in updates:
        parts += _resources(to_json(update).get("linux", {}).get("resources", {}))
    if not parts:
        return f"{DIM}no change{RESET}", ""
    return f"{GREEN}adjusted{RESET}", ", ".join(parts)


def who(result: EventResult, step: Any) -> tuple[str, str]:
    pod = step.request.pod
    qos = pod.labels.get("koordinator.sh/qosClass", "-")
    name = pod.name
    if "container" in step.request.DESCRIPTOR.fields_by_name and step.request.HasField("container"):
        name += "/" + step.request.container.name
    return name, qos


def webhook_outcomes(log_path: Path) -> list[dict[str, Any]]:
    """The bridge's per-webhook log lines (JSON), in order."""
    out = []
    with contextlib.suppress(OSError):
        for line in log_path.read_text().splitlines():
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if isinstance(record, dict) and record.get("webhook"):
                    out.append(record)
    return out


def print_table(rows: Sequence[tuple[str, ...]]) -> None:
    headers = ("event", "pod/container", "qos", "webhook", "decision", "adjustment", "latency")
    widths = [max(len(_plain(r[i])) for r in [headers, *rows]) for i in range(len(headers) - 1)]
    def line(cells: tuple[str, ...]) -> str:
        padded = [c + " " * (w - len(_plain(c))) for c, w in zip(cells[:-1], widths, strict=True)]
        return "  ".join([*padded, cells[-1]])
    print(BOLD + line(headers) + RESET)
    for row in rows:
        print(line(row))


def _plain(text: str) -> str:
    for code in (BOLD, DIM, GREEN, YELLOW, RED, RESET):
        if code:
            text = text.replace(code, "")
    return text


# -- processes ----------------------------------------------------------------------------


@contextlib.contextmanager
def started(name: str, argv: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Run a child process for the duration of the block; always stopped by its PID."""
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


async def wait_healthy(sock: Path, proc: subprocess.Popen[bytes], what: str) -> None:
    transport = httpx.AsyncHTTPTransport(uds=str(sock))
    async with httpx.AsyncClient(transport=transport, base_url="http://demo", timeout=1) as client:
        loop = asyncio.get_running_loop()
        until = loop.time() + STARTUP_TIMEOUT_S
        while loop.time() < until:
            if proc.poll() is not None:
                raise RuntimeError(f"{what} exited with code {proc.returncode}")
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get("/healthz")).status_code == 200:
                    return
            await asyncio.sleep(0.1)
    raise RuntimeError(f"{what} did not become healthy within {STARTUP_TIMEOUT_S:.0f}s")


async def wait_first_resync(sock: Path) -> None:
    """Wait until the policy server's start-up catch-up push has run (it retries with
    back-off until the bridge is up), so it does not interleave with the scenario."""
    transport = httpx.AsyncHTTPTransport(uds=str(sock))
    async with httpx.AsyncClient(transport=transport, base_url="http://demo", timeout=1) as client:
        loop = asyncio.get_running_loop()
        until = loop.time() + STARTUP_TIMEOUT_S
        while loop.time() < until:
            with contextlib.suppress(httpx.HTTPError):
                metrics = (await client.get("/metrics")).text
                if 'policy_resyncs_total{result="ok"}' in metrics:
                    return
            await asyncio.sleep(0.1)


# -- the demo -------------------------------------------------------------------------------

# The policy server's node effects go to these directories under the work dir, never to the
# machine's /sys/fs/cgroup, /proc, resctrl or system D-Bus.
FAKE_ROOTS = {"--cgroup-root": "node/cgroup", "--proc-root": "node/proc",
              "--resctrl-root": "node/resctrl", "--sys-root": "node/sys"}
# The node the demo plays: the simulator's default (8 CPUs, one NUMA node, 32 GiB), which the
# policy server reads from the fake sysfs and procfs (its rules are checked against it).
DEMO_NODE = NodeSpec()
SHARED_POOLS = "node.koordinator.sh/cpu-shared-pools"


def fake_node_roots(work: Path) -> None:
    """Empty cgroup, proc and resctrl roots (the policy server's probe finds nothing to write)
    and the demo node's sysfs and meminfo."""
    for rel in FAKE_ROOTS.values():
        (work / rel).mkdir(parents=True, exist_ok=True)
    write_node(DEMO_NODE, work / "node")


def write_demo_rules(rules: Path, ls_pool: str) -> None:
    """The example rules with one LS share pool, `ls_pool`, on the demo node's NUMA node 0
    (the example names no CPUs: its pools are the node's own)."""
    doc = yaml.safe_load(RULES_EXAMPLE.read_text())
    doc["topology"][SHARED_POOLS] = [{"socket": 0, "node": 0, "cpuset": ls_pool}]
    rules.write_text(yaml.safe_dump(doc, sort_keys=False))


def demo_policy_argv(work: Path, control_sock: Path) -> list[str]:
    """``nri-policy-server``'s command line in the demo: its socket and rules in ``work``,
    node effects on fake roots below it, no systemd bus."""
    roots = [arg for flag, rel in FAKE_ROOTS.items() for arg in (flag, str(work / rel))]
    return [str(BIN / "nri-policy-server"), "--uds", str(work / "policy.sock"),
            "--rules", str(work / "rules.yaml"), "--rules-poll-interval", "0.2",
            "--bridge-control", f"unix://{control_sock}", *roots,
            "--systemd-properties", "off"]


async def demo(work: Path) -> int:
    policy_sock, control_sock = work / "policy.sock", work / "control.sock"
    nri_sock, cri_sock = work / "nri.sock", work / "cri.sock"
    rules = work / "rules.yaml"
    write_demo_rules(rules, format_cpu_list(range(DEMO_NODE.cpus)))
    config = work / "bridge.yaml"
    config.write_text(BRIDGE_CONFIG.format(sock=policy_sock, sysfs=work / FAKE_ROOTS['--sys-root']))
    bridge_log = work / "bridge.log"

    scenario = load_scenario(SCENARIO)
    runtime = serve_cri(SimulatedRuntime(str(nri_sock),
                                         PROFILES[scenario.profile or "containerd-2.1.9"],
                                         request_timeout_s=2.0), cri_sock)
    scenario.seed(runtime)
    await runtime.start()
    print(f"{BOLD}nri-webhook-bridge demo{RESET}  (work dir {work})")
    print(f"runtime simulator: {runtime.profile.runtime_name} {runtime.profile.runtime_version} "
          f"(NRI v{'.'.join(map(str, runtime.profile.nri))}) on {nri_sock}")
    fake_node_roots(work)
    policy_argv = demo_policy_argv(work, control_sock)
    bridge_argv = [str(BIN / "nri-webhook-bridge"), "run", "--nri-socket", str(nri_sock),
                   "--cri-socket", str(cri_sock), "--config", str(config),
                   "--control-socket", str(control_sock),
                   "--log-format", "json", "--log-file", str(bridge_log)]
    try:
        with started("policy server", policy_argv, work / "policy.log") as policy, \
                started("bridge", bridge_argv, work / "bridge.out") as bridge:
            await wait_healthy(policy_sock, policy, "nri-policy-server")
            print(f"policy server:     koordinator-qos on {policy_sock}")
            conn = await runtime.wait_plugin(timeout_s=STARTUP_TIMEOUT_S)
            await wait_healthy(control_sock, bridge, "nri-webhook-bridge")
            await wait_first_resync(policy_sock)
            print(f"bridge:            registered as {conn.name}, events 0x{conn.events:04x}; "
                  f"Synchronize covered {len(runtime.state.containers)} existing container(s)")
            print(f"\n{DIM}{scenario.description}{RESET}\n")
            results = await run_scenario(runtime, scenario)
            failures = _report(results, scenario, bridge_log)
            failures += await _rule_change(runtime, rules)
            if runtime.closed_plugins:
                print(f"{RED}runtime closed plugins: {runtime.closed_plugins}{RESET}")
                failures += 1
            if os.environ.get("DEMO_KEEP") is not None:
                print(f"\nlogs: {work}/bridge.log (JSON), {work}/policy.log")
            else:
                print(f"\n{DIM}(DEMO_KEEP=1 make demo keeps the logs and sockets){RESET}")
            return 0 if failures == 0 else 1
    finally:
        await runtime.stop()


def _report(results: list[EventResult], scenario: Any, bridge_log: Path) -> int:
    outcomes = webhook_outcomes(bridge_log)
    rows = []
    failures = 0
    for result, step in zip(results, scenario.events, strict=True):
        name, qos = who(result, step)
        decision, adjustment = describe_result(result)
        webhook = next((o for o in outcomes if o.get("event") == result.event
                        and o.get("pod", "").endswith(step.request.pod.name)), None)
        if webhook is not None:
            outcomes.remove(webhook)
            hook = f"{webhook['webhook']} ({webhook.get('outcome', '?')})"
        else:
            hook = f"{DIM}-{RESET}"
        failures += 0 if result.ok else 1
        rows.append((result.event, name, qos, hook, decision, adjustment,
                     f"{result.latency_s * 1000:.2f} ms"))
    print_table(rows)
    return failures


async def _rule_change(runtime: SimulatedRuntime, rules: Path) -> int:
    """Move the LS share pool; the policy server pushes updates through the bridge."""
    before = len(runtime.updates)
    write_demo_rules(rules, "4-7")
    print(f"\n{BOLD}rule change:{RESET} LS share pool of NUMA node 0 shrinks from 0-7 to 4-7")
    try:
        await runtime.wait_updates(count=before + 1, timeout_s=10)
    except Exception:
        print(f"{RED}no container update arrived within 10 s{RESET}")
        return 1
    await asyncio.sleep(0.5)  # let the rest of the batch arrive
    names = {c.id: c.name for c in runtime.state.containers.values()}
    via_cri = {id(u) for u in runtime.cri_updates}
    for update in runtime.updates[before:]:
        summary = ", ".join(_resources(to_json(update).get("linux", {}).get("resources", {})))
        # On runtimes where NRI UpdateContainers can deadlock, the bridge updates through CRI.
        route = "CRI UpdateContainerResources" if id(update) in via_cri else "UpdateContainers"
        print(f"  {route} -> {names.get(update.container_id, update.container_id[:12])}: "
              f"{summary}")
    return 0


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="nri-webhook-bridge-demo-"))
    os.chmod(work, 0o700)
    try:
        return asyncio.run(demo(work))
    except KeyboardInterrupt:
        return 130
    except RuntimeError as exc:
        print(f"{RED}demo failed: {exc}{RESET}", file=sys.stderr)
        for log in sorted(work.glob("*.log")) + sorted(work.glob("*.out")):
            print(f"--- {log.name} (last lines)", file=sys.stderr)
            print("\n".join(log.read_text(errors="replace").splitlines()[-15:]), file=sys.stderr)
        return 1
    finally:
        if os.environ.get("DEMO_KEEP") is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
