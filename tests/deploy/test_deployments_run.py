"""Each deployment, run for real on this machine.

For the DaemonSet (base and overlays), the systemd units and the compose file:
the deployment's filesystem is laid out under a temporary directory (config
files written there, socket directories and /var/run/nri as directories), every
path in the command lines, the probes and the config files is moved there, and
the two commands run as processes of the installed console scripts. The
runtime simulator listens where the runtime's NRI socket would be (and serves
CRI where its CRI socket would be) and plays the koordinator scenario. This
checks what the static tests cannot: that the pair as written comes up, passes
its own probe commands, serves a node, sends a container update through the
control socket to the runtime's CRI socket (containerd 2.1.9 can deadlock on
NRI UpdateContainers), and exits cleanly on SIGTERM. A metrics listener on a
pod port (`--metrics-address 0.0.0.0:9464`) is moved to a free loopback port,
and its /metrics is scraped.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shutil
import signal
import socket
import stat
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bridge.simulator import SimulatedRuntime
from bridge.simulator.cri_server import serve_cri
from bridge.simulator.scenario import load_scenario, run_scenario
from bridge.webhooks.node_cpusets import read_node_cpus
from tests.deploy import support as s
from tests.waiting import log_tail, path_exists, until

pytestmark = pytest.mark.processes  # starts processes: not in make check

START_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 10.0
POLL_S = 0.1
BIN = Path(sys.executable).parent


@dataclass
class Deployment:
    """Container (or host) paths mapped under ``root``, and what runs there."""

    root: Path
    prefixes: dict[str, Path] = field(default_factory=dict)
    policy_argv: list[str] = field(default_factory=list)
    bridge_argv: list[str] = field(default_factory=list)
    # Probe commands (argv, timeout) that must pass once the bridge is registered.
    probes: list[tuple[list[str], float]] = field(default_factory=list)
    # --metrics-address values as written -> the free loopback address used instead.
    addresses: dict[str, str] = field(default_factory=dict)

    def mount(self, path: str, name: str | None = None) -> Path:
        """Map ``path`` to a directory; mounts of one volume share ``name``."""
        host = self.root / (name or path.strip("/").replace("/", "-"))
        host.mkdir(exist_ok=True)
        self.prefixes[path.rstrip("/")] = host
        return host

    def translate(self, text: str) -> str:
        for prefix in sorted(self.prefixes, key=len, reverse=True):
            text = text.replace(prefix + "/", f"{self.prefixes[prefix]}/")
        option, sep, address = text.partition("--metrics-address=")
        if sep:
            local = self.addresses.setdefault(address, f"127.0.0.1:{_free_port()}")
            text = option + sep + local
        return text

    def metrics_urls(self) -> dict[str, str]:
        """program -> its /metrics URL, for each program given a metrics address."""
        urls = {}
        for argv in (self.bridge_argv, self.policy_argv):
            program, args = s.parse_command(argv)
            if args.metrics_address:
                urls[program] = f"http://{args.metrics_address}/metrics"
        return urls

    def argv(self, argv: Sequence[str]) -> list[str]:
        return [self.translate(a) for a in argv]

    def write(self, path: str, text: str) -> None:
        Path(self.translate(path)).write_text(self.translate(text), encoding="utf-8")


def kubernetes(root: Path, variant: Path) -> Deployment:
    pod = s.Pod(s.render(variant))
    d = Deployment(root)
    for c in (pod.bridge, pod.policy):
        for m in c["volumeMounts"]:
            d.mount(m["mountPath"], m["name"])
    for c in (pod.bridge, pod.policy):
        for m in c["volumeMounts"]:
            volume = next(v for v in pod.spec["volumes"] if v["name"] == m["name"])
            if "configMap" in volume:
                cm = s.one(pod.docs, "ConfigMap", volume["configMap"]["name"])
                for key, text in cm["data"].items():
                    d.write(f"{m['mountPath']}/{key}", text)
    # As kubelet runs them: the settings ConfigMap's values expanded.
    d.policy_argv = d.argv(pod.policy_argv)
    d.bridge_argv = d.argv(pod.bridge_argv)
    d.probes = [(d.argv(c[p]["exec"]["command"]), c[p]["timeoutSeconds"])
                for c in (pod.bridge, pod.policy) for p in ("readinessProbe", "livenessProbe")]
    return d


def systemd(root: Path) -> Deployment:
    units = [s.read_unit(s.SYSTEMD / f"{name}.service") for name in (s.POLICY_SERVER, s.BRIDGE)]
    d = Deployment(root)
    for unit in units:
        d.mount("/run/" + unit.value("Service", "RuntimeDirectory"))
    _, bridge_args = s.parse_command(s.exec_argv(units[1]))
    _, policy_args = s.parse_command(s.exec_argv(units[0]))
    for socket_path in (bridge_args.nri_socket, bridge_args.cri_socket):
        d.mount(os.path.dirname(socket_path))
    installed = {bridge_args.config: s.SYSTEMD / "config.yaml",
                 str(policy_args.rules): s.SYSTEMD / "rules.yaml"}
    for path in installed:
        d.mount(os.path.dirname(path))
    for path, source in installed.items():
        d.write(path, source.read_text(encoding="utf-8"))
    d.policy_argv, d.bridge_argv = (d.argv([os.path.basename(a[0]), *a[1:]])
                                    for a in map(s.exec_argv, units))
    return d


def compose(root: Path) -> Deployment:
    c = s.Compose()
    d = Deployment(root)
    for svc in (c.bridge, c.policy):
        for m in c.mounts(svc):
            d.mount(m["target"])
    for svc in (c.bridge, c.policy):
        for m in c.mounts(svc):
            if m["type"] == "bind" and m["source"].startswith("./"):
                for f in (s.REPO / m["source"]).glob("*.yaml"):
                    d.write(f"{m['target']}/{f.name}", f.read_text(encoding="utf-8"))
    d.policy_argv = d.argv(c.policy["command"])
    d.bridge_argv = d.argv(c.bridge["command"])
    d.probes = [(d.argv(svc["healthcheck"]["test"][1:]), 3.0) for svc in (c.bridge, c.policy)]
    return d


async def _passes(argv: Sequence[str], timeout_s: float) -> bool:
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.DEVNULL,
                                                stderr=asyncio.subprocess.DEVNULL)
    async with asyncio.timeout(timeout_s):
        return await proc.wait() == 0


@contextlib.asynccontextmanager
async def _process(argv: list[str], log: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    program = BIN / argv[0]
    assert program.is_file(), f"console script {argv[0]} is not installed in {BIN}"
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(str(program), *argv[1:], stdout=out,
                                                    stderr=out, stdin=asyncio.subprocess.DEVNULL)
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


Samples = dict[str, list[tuple[str, dict[str, str], float]]]


async def scrape(url: str) -> Samples:
    """family name -> its samples (name, labels, value), from a real GET of ``url``."""
    async with httpx.AsyncClient(timeout=5.0) as client:
        reply = await client.get(url)
    assert reply.status_code == 200, f"GET {url}: {reply.status_code}"
    assert reply.headers["content-type"].startswith("text/plain"), reply.headers
    return {f.name: [(x.name, dict(x.labels), x.value) for x in f.samples]
            for f in text_string_to_metric_families(reply.text)}


def _exists(path: Path) -> bool:
    return path.exists()


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-2000:]


async def _stop(proc: asyncio.subprocess.Process, log: Path) -> None:
    proc.send_signal(signal.SIGTERM)
    async with asyncio.timeout(STOP_TIMEOUT_S):
        code = await proc.wait()
    assert code == 0, f"exit {code} on SIGTERM; log:\n{_tail(log)}"


def _mode(path: Path) -> int:
    st = path.stat()
    assert stat.S_ISSOCK(st.st_mode), f"{path} is not a socket"
    return stat.S_IMODE(st.st_mode)


async def _update_through_control_socket(runtime: SimulatedRuntime, control: Path) -> None:
    """POST /v1/updates as the policy server does: the runtime gets it through its CRI socket,
    where the deployment points the bridge, and not one NRI UpdateContainers."""
    cid = next(iter(runtime.state.containers))
    update = {"container_id": cid, "linux": {"resources": {"cpu": {"shares": 321}}}}
    transport = httpx.AsyncHTTPTransport(uds=str(control))
    async with httpx.AsyncClient(transport=transport, base_url="http://bridge",
                                 timeout=10.0) as client:
        reply = await client.post("/v1/updates", json={"update": [update]})
    assert reply.status_code == 200 and reply.json() == {"failed": []}, reply.text
    assert [u.container_id for u in runtime.cri_updates] == [cid]
    assert runtime.unsafe_updates == []
    assert runtime.state.containers[cid].linux.resources.cpu.shares.value == 321


@pytest.fixture
def root() -> Iterator[Path]:
    # Short: Unix socket paths are limited to 107 bytes.
    path = Path(tempfile.mkdtemp(prefix="nwb-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


CASES = [*(f"kubernetes-{v.name}" for v in [s.BASE, *s.OVERLAYS]), "systemd", "compose"]


def _deployment(case: str, root: Path) -> Deployment:
    if case == "systemd":
        return systemd(root)
    if case == "compose":
        return compose(root)
    variant = next(v for v in [s.BASE, *s.OVERLAYS] if case == f"kubernetes-{v.name}")
    return kubernetes(root, variant)


@dataclass
class Served:
    """A deployment that came up and served the koordinator scenario."""

    deployment: Deployment
    # program -> its /metrics as scraped after the scenario (programs with a listener).
    metrics: dict[str, Samples]


def _node_has_cpus(cpus: set[int]) -> bool:
    """Whether this machine has every CPU of `cpus` online (read as the products read it)."""
    online = read_node_cpus("/sys").cpus
    return online is not None and cpus <= online


@contextlib.asynccontextmanager
async def serving(d: Deployment, root: Path) -> AsyncIterator[Served]:
    """Start the pair as written, pass its probes, play the scenario, scrape; stop on exit."""
    _, policy_args = s.parse_command(d.policy_argv)
    _, bridge_args = s.parse_command(d.bridge_argv)
    policy_socket, control_socket, nri_socket, cri_socket = (
        Path(policy_args.uds), Path(bridge_args.control_socket), Path(bridge_args.nri_socket),
        Path(bridge_args.cri_socket))
    for path in (policy_socket, control_socket, nri_socket, cri_socket):
        assert path.is_relative_to(root), f"{path} was not moved under the test directory"
    scenario = load_scenario("koordinator-qos.json")
    runtime = serve_cri(SimulatedRuntime(nri_socket, scenario.profile or "containerd-2.1.9"),
                        cri_socket)
    scenario.seed(runtime)
    policy_log, bridge_log = root / "policy-server.log", root / "bridge.log"

    async with _process(d.policy_argv, policy_log) as policy:
        await until(path_exists(policy_socket), what=f"{policy_socket} appears",
                    timeout_s=START_TIMEOUT_S, interval_s=POLL_S, proc=policy,
                    details=log_tail(policy_log))
        await runtime.start()
        try:
            async with _process(d.bridge_argv, bridge_log) as bridge:
                await runtime.wait_plugin(START_TIMEOUT_S)
                for argv, timeout_s in d.probes:
                    await until(functools.partial(_passes, argv, timeout_s),
                                what=f"probe {argv} passes", timeout_s=START_TIMEOUT_S,
                                interval_s=POLL_S)
                # Shared by group: the bridge and the policy server run as different users.
                assert _mode(policy_socket) == _mode(control_socket) == 0o660

                results = await run_scenario(runtime, scenario)
                assert results and all(r.ok for r in results), [r.error for r in results]
                # The LSR pod's scheduler-assigned cpuset (2-3) reached its container where
                # the node has those CPUs. The pair reads this machine's own /sys (as deployed):
                # on a smaller node the policy server leaves the pod unpinned (issue 45's node
                # truth), so the container keeps the runtime's cpuset.
                created = {r.container.linux.resources.cpu.cpus for r in results
                           if r.event == "CreateContainer" and r.container is not None}
                assert ("2-3" in created) == _node_has_cpus({2, 3}), created
                assert not runtime.closed_plugins and not runtime.lost_plugins
                await _update_through_control_socket(runtime, control_socket)
                metrics = {program: await scrape(url)
                           for program, url in d.metrics_urls().items()}
                yield Served(d, metrics)
                await _stop(bridge, bridge_log)
        finally:
            await runtime.stop()
        await _stop(policy, policy_log)
    # Both remove their sockets on a clean exit, so a restart starts clean.
    assert not _exists(policy_socket) and not _exists(control_socket)


@pytest.mark.parametrize("case", CASES)
async def test_deployment_comes_up_and_serves_a_koordinator_node(case: str, root: Path) -> None:
    async with serving(_deployment(case, root), root) as served:
        if case.startswith("kubernetes-"):
            # Prometheus sees the node's events and decisions on the pod's metrics ports.
            bridge, policy = served.metrics[s.BRIDGE], served.metrics[s.POLICY_SERVER]
            events = {labels["event"] for _, labels, _ in bridge["nri_webhook_bridge_events"]}
            assert "CreateContainer" in events
            assert [(n, v) for n, _, v in bridge["nri_webhook_bridge_connected"]] == [
                ("nri_webhook_bridge_connected", 1.0)]
            assert {labels["policy"] for _, labels, _ in policy["policy_requests"]} == {
                "koordinator-qos"}
        else:
            assert served.metrics == {}, "only the pod publishes metrics ports"
