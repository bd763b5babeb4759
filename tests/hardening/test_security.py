"""Security properties (docs/operations.md#hostile-policy-replies-and-security), from real processes
and real sockets (issue 6 part 5).

- Sockets: `nri-policy-server --uds` and the bridge's control socket are created
  0600/0660, owned by the user and primary group of the process that made them
  (docs/deployment.md#6-security-notes), and are removed on SIGTERM; a path that is not a
  socket (a file, a symlink) is never replaced.
- The allow list holds against policy `update`s (resources only), `remove`s (a
  removal needs its kind like an addition) and `POST /v1/updates`.
- Plain http:// to a non-loopback host is refused at config load unless
  `allow_insecure_http: true`; TLS with a client certificate and a bearer token
  work end to end, and a wrong CA fails before the token leaves the bridge.
- A 900 KB reply cannot flood the log: every line the bridge writes stays under
  4 KiB, however the policy's text escapes in JSON, and there is one line per call.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bridge.cli import main as bridge_main
from bridge.control.serving import control_listener
from bridge.errors import BridgeError, ConfigError
from bridge.simulator.synthetic import synthetic_state
from bridge.webhooks.failures import WebhookFailure
from bridge.webhooks.guard import Scope, parse_reply
from bridge.webhooks.specs import parse_webhooks, webhook_from_url
from policy_server.main import StartupError, bind_unix_socket
from policy_server.main import main as policy_main
from tests.hardening.policy_http import Behaviour, HttpRequest, RawPolicy, json_reply, reply
from tests.hardening.policy_stack import (
    LENIENT,
    NAMESPACES,
    STRICT,
    Stack,
    both,
    check_failure,
    check_log_lines,
    no_change,
    stack,
)
from tests.hardening.policy_tls import Pki, server_context, temporary_pki
from tests.hardening.processes import POLICY_SERVER, Process
from tests.waiting import accepts, until

pytestmark = pytest.mark.timeout(60)

REPO = Path(__file__).resolve().parents[2]
POLICY_MODULE = Path(__file__).with_name("env_policy.py")
VALID = {"adjust": {"env": [{"key": "DECIDED", "value": "1"}]}}
PODS, CONTAINERS = synthetic_state(1, 2)
RUNNING = CONTAINERS[0].id  # a container the runtime runs and the bridge knows
# The same in the namespace the `strict` webhook selects (a webhook's scope binds its updates
# and evictions: RUNNING is outside strict's).
STRICT_PODS, STRICT_CONTAINERS = synthetic_state(1, 1)
STRICT_PODS[0].id = STRICT_CONTAINERS[0].pod_sandbox_id = "5" * 64
STRICT_PODS[0].namespace = NAMESPACES[STRICT]
STRICT_CONTAINERS[0].id = "6" * 64
RUNNING_STRICT = STRICT_CONTAINERS[0].id
MIB = 1 << 20


def _resources(**resources: Any) -> dict[str, Any]:
    return {"container_id": RUNNING, "linux": {"resources": resources}}


# -- sockets ---------------------------------------------------------------------------


def _check_socket(path: Path, mode: int) -> None:
    st = path.lstat()
    assert stat.S_ISSOCK(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == mode, oct(st.st_mode)
    assert (st.st_uid, st.st_gid) == (os.geteuid(), os.getegid())


def _check_removed(path: Path) -> None:
    assert not path.exists() and not path.is_symlink()  # removed on the way out


@contextlib.asynccontextmanager
async def _started(argv: list[str], log: Path, listens_on: Path) -> AsyncIterator[Process]:
    process = await Process.start(argv, log)
    try:
        # A wait that fails raises WaitTimeout (never TimeoutError), naming the log.
        await until(accepts(listens_on), what=f"{argv[:3]} listens on {listens_on}",
                    timeout_s=15.0, in_thread=True, proc=process.proc,
                    details=process.log_text)
        yield process
    finally:
        await process.kill()


async def _check_process_socket(argv: list[str], log: Path, path: Path, mode: int,
                                ready: str | None = None) -> None:
    """Start, check the socket, SIGTERM (once `ready` is in the log): exit 0, socket gone."""
    async with _started(argv, log, path) as process:
        _check_socket(path, mode)
        if ready is not None:
            await until(lambda: ready in process.log_text(),
                        what="the process logs that it is ready",
                    timeout_s=15.0)
        code, _ = await process.terminate()
    assert code == 0, process.log_text()
    _check_removed(path)


@pytest.mark.processes
async def test_policy_server_stops_cleanly_on_a_sigterm_sent_during_start(workdir: Path) -> None:
    """A SIGTERM that arrives before uvicorn has its handlers (here: held pending from the
    first instruction, as a supervisor that starts us with the signal blocked would) is
    delivered once they are in place: exit 0, socket removed. Without that hand-over it
    raised inside uvloop's signal set-up (exit 1) or stayed pending forever."""
    sock = workdir / "p" / "policy.sock"
    # The child inherits this thread's signal mask: blocked here around the start, not in a
    # preexec_fn (Python code between fork and exec can hang in a process with gRPC's threads).
    unblocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    try:
        with (workdir / "p.log").open("ab") as log:
            proc = await asyncio.create_subprocess_exec(
                str(POLICY_SERVER), "--uds", str(sock), "--policy-module", str(POLICY_MODULE),
                "--no-koordinator", "--log-level", "warning", stdin=asyncio.subprocess.DEVNULL,
                stdout=log, stderr=asyncio.subprocess.STDOUT)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, unblocked)
    try:
        await until(accepts(sock), what=f"{sock} accepts connections", timeout_s=30.0,
                    in_thread=True)
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), 30.0)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert code == 0, (workdir / "p.log").read_text()
    _check_removed(sock)


@pytest.mark.processes
async def test_policy_socket_is_created_0600_or_0660(workdir: Path) -> None:
    def argv(sock: Path, *mode: str) -> list[str]:
        return [str(POLICY_SERVER), "--uds", str(sock), "--policy-module", str(POLICY_MODULE),
                "--no-koordinator", "--log-level", "warning", *mode]
    default, shared = workdir / "a" / "policy.sock", workdir / "b" / "policy.sock"
    await asyncio.gather(
        _check_process_socket(argv(default), workdir / "a.log", default, 0o600),
        _check_process_socket(argv(shared, "--socket-mode", "0660"), workdir / "b.log", shared,
                              0o660))


@pytest.mark.processes
def test_policy_server_removes_its_socket_on_a_sigterm_right_after_the_bind(
        workdir: Path) -> None:
    """A SIGTERM that lands the moment the socket file exists (sent by the process itself,
    from inside the bind, so the timing is exact): exit 0 and the file removed. Before the
    stop signals were held from the bind on, this exited 0 and left the file behind."""
    sock = workdir / "s" / "policy.sock"
    script = (
        "import os, signal, sys\n"
        "import policy_server.main as m\n"
        "bind = m.bind_unix_socket\n"
        "def bind_then_stop(path, mode):\n"
        "    s = bind(path, mode)\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    return s\n"
        "m.bind_unix_socket = bind_then_stop\n"
        "sys.exit(m.main(sys.argv[1:]))\n")
    done = subprocess.run(
        [sys.executable, "-c", script, "--uds", str(sock), "--policy-module",
         str(POLICY_MODULE), "--no-koordinator", "--log-level", "warning"],
        capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert not sock.exists()


def test_policy_server_offers_no_wider_socket_mode(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        policy_main(["--socket-mode", "0666"])
    assert exc.value.code == 2
    assert "--socket-mode" in capsys.readouterr().err


@pytest.mark.processes
async def test_control_socket_is_created_0660_or_as_configured(workdir: Path) -> None:
    def argv(*where: str) -> list[str]:
        # No runtime listens: the bridge keeps retrying, its control API serves meanwhile.
        return [sys.executable, "-m", "bridge", "run", "--nri-socket",
                str(workdir / "no-runtime" / "nri.sock"), "--log-format", "json", *where]
    default, private = workdir / "run" / "a" / "control.sock", workdir / "b" / "control.sock"
    config = workdir / "private.yaml"
    config.write_text(json.dumps({"control": {"socket": str(private), "socket_mode": "0600"}}))
    # The bridge binds its control socket just before it installs its signal handlers.
    ready = '"msg":"starting"'
    await asyncio.gather(
        _check_process_socket(argv("--control-socket", str(default)), workdir / "a.log",
                              default, 0o660, ready),
        _check_process_socket(argv("--config", str(config)), workdir / "b.log", private, 0o600,
                              ready))
    # The directory the bridge created for it is closed to others.
    assert stat.S_IMODE((workdir / "run" / "a").stat().st_mode) & 0o007 == 0


@pytest.mark.parametrize("mode", ["0666", "0662", "0777", 0o606])
def test_a_world_accessible_control_socket_is_refused(mode: str | int, workdir: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    config = workdir / "config.yaml"
    config.write_text(json.dumps({"control": {"socket_mode": mode}}))
    assert bridge_main(["validate-config", str(config)]) == 2
    assert "control.socket_mode" in capsys.readouterr().err


@pytest.mark.parametrize("squatter", ["file", "symlink"])
def test_a_path_that_is_not_a_socket_is_never_replaced(squatter: str, workdir: Path) -> None:
    target = workdir / "precious"
    target.write_text("keep")
    for path in (workdir / "control.sock", workdir / "policy.sock"):
        if squatter == "file":
            path.write_text("keep")
        else:
            path.symlink_to(target)
    with pytest.raises(BridgeError, match="not a socket"):
        control_listener(str(workdir / "control.sock"), 0o660)
    with pytest.raises(StartupError, match="not a socket"):
        bind_unix_socket(workdir / "policy.sock", 0o600)
    assert target.read_text() == "keep"
    for path in (workdir / "control.sock", workdir / "policy.sock"):
        assert path.is_symlink() == (squatter == "symlink") and path.read_text() == "keep"


# -- the allow list: updates and removals in policy replies ---------------------------

# name -> (reply, failure kind, reason fragment)
BYPASSES: dict[str, tuple[dict[str, Any], str, str]] = {
    "update with a cgroup device rule": (
        {"update": [_resources(devices=[{"allow": True, "type": "a", "access": "rwm"}])]},
        "disallowed", "update[0]: devices not in the webhook's allow list"),
    "update carrying a mount": (
        {"update": [{**_resources(), "mounts": [{"destination": "/host", "source": "/"}]}]},
        "schema_violation", "update[0].mounts: unknown field"),
    "update carrying a hook": (
        {"update": [{**_resources(), "hooks": {"prestart": [{"path": "/bin/sh"}]}}]},
        "schema_violation", "update[0].hooks: unknown field"),
    "update with linux beyond resources": (
        {"update": [{"container_id": RUNNING, "linux": {"namespaces": [{"type": "network"}]}}]},
        "schema_violation", "update[0].linux.namespaces: unknown field"),
    "update with a unified key that is a path": (
        {"update": [_resources(unified={"../../devices.allow": "a *:* rwm"})]},
        "invalid_value", "is not a cgroup v2 file name"),
    "adjust with a cgroup device rule": (
        {"adjust": {"linux": {"resources": {"devices": [{"allow": True, "access": "rwm"}]}}}},
        "disallowed", "adjust: devices not in the webhook's allow list"),
    "remove.mounts": ({"adjust": {"remove": {"mounts": ["/etc/resolv.conf"]}}},
                      "disallowed", "adjust: mounts not in"),
    "remove.devices": ({"adjust": {"remove": {"devices": ["/dev/null"]}}},
                       "disallowed", "adjust: devices not in"),
    "remove.namespaces": ({"adjust": {"remove": {"namespaces": ["pid", "network"]}}},
                          "disallowed", "adjust: namespaces not in"),
    "remove.sysctl": ({"adjust": {"remove": {"sysctl": ["net.ipv4.ip_forward"]}}},
                      "disallowed", "adjust: sysctl not in"),
    "remove.net_devices": ({"adjust": {"remove": {"net_devices": ["eth0"]}}},
                           "disallowed", "adjust: net_devices not in"),
    "host network namespace": ({"adjust": {"linux": {"namespaces": [{"type": "network"}]}}},
                               "disallowed", "namespaces not in"),
    "seccomp unconfined": ({"adjust": {"linux": {"seccomp_policy": {"default_action": "ALLOW"}}}},
                           "disallowed", "seccomp not in"),
    "CDI device": ({"adjust": {"CDI_devices": [{"name": "nvidia.com/gpu=all"}]}},
                   "disallowed", "cdi_devices not in"),
    "args": ({"adjust": {"args": ["/bin/sh", "-c", "id"]}}, "disallowed", "args not in"),
    "cgroups_path": ({"adjust": {"linux": {"cgroups_path": "/"}}}, "disallowed",
                     "cgroups_path not in"),
}


@pytest.mark.parametrize("name", BYPASSES)
async def test_the_allow_list_cannot_be_bypassed(name: str, workdir: Path,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    doc, kind, reason = BYPASSES[name]
    with caplog.at_level(logging.INFO):
        async with stack(workdir, json_reply(doc), seed=(PODS, CONTAINERS)) as s:
            results = await both(s)
            assert s.runtime.updates == []
    check_failure(s, caplog.records, results, kind, reason)
    assert s.runtime.state.containers[RUNNING].linux.resources == CONTAINERS[0].linux.resources


async def test_allowed_updates_and_removals_still_work(workdir: Path) -> None:
    """The control case: resources in an update, and a removal whose kind is allowed."""
    doc = {"update": [_resources(cpu={"shares": 512}, rdt_class="gold", blockio_class="slow")],
           "adjust": {"remove": {"mounts": ["/data"]}, "env": [{"key": "DECIDED", "value": "1"}]}}
    allow = ["resources", "rdt_class", "blockio_class", "env", "mounts"]
    async with stack(workdir, json_reply(doc), seed=(PODS, CONTAINERS), allow=allow) as s:
        result = await s.run(LENIENT)
    assert result.ok and result.container is not None, result.error
    assert "DECIDED=1" in result.container.env
    [update] = result.updates
    assert update.container_id == RUNNING
    sent = update.linux.resources  # the bridge passed every allowed field on
    assert (sent.cpu.shares.value, sent.rdt_class.value, sent.blockio_class.value) == (
        512, "gold", "slow")
    # What the runtime keeps of a reply's update is the field table's: containerd applies the
    # CPU shares and ignores the classes (toCRIResources, bridge/contract/runtime_effects.py).
    resources = s.runtime.state.containers[RUNNING].linux.resources
    assert resources.cpu.shares.value == 512
    assert not resources.HasField("rdt_class") and not resources.HasField("blockio_class")


# -- the allow list: unsolicited updates ----------------------------------------------

# name -> (body, HTTP status, fragment of the error)
UNSOLICITED: dict[str, tuple[bytes, int, str]] = {
    "cgroup device rule": (
        json.dumps({"update": [_resources(devices=[{"allow": True, "access": "rwm"}])]}).encode(),
        400, "update[0]: devices not in"),
    "a mount": (json.dumps({"update": [{**_resources(), "mounts": [{"destination": "/x"}]}]})
                .encode(), 400, "update[0].mounts: unknown field"),
    "a hook": (json.dumps({"update": [{**_resources(), "hooks": {}}]}).encode(), 400,
               "update[0].hooks: unknown field"),
    "linux beyond resources": (
        json.dumps({"update": [{"container_id": RUNNING, "linux": {"oom_score_adj": -1000}}]})
        .encode(), 400, "update[0].linux.oom_score_adj: unknown field"),
    "a unified key that is a path": (
        json.dumps({"update": [_resources(unified={"../cgroup.procs": "1"})]}).encode(), 400,
        "is not a cgroup v2 file name"),
    "an unknown container": (
        json.dumps({"update": [{**_resources(cpu={"shares": 2}), "container_id": "feed"}]})
        .encode(), 400, "update[0].container_id: unknown container 'feed'"),
    "a cpuset id of 5000 digits": (
        json.dumps({"update": [_resources(cpu={"cpus": "0-" + "9" * 5000})]}).encode(), 400,
        "update[0].linux.resources.cpu.cpus: invalid range"),
    "a key besides update": (json.dumps({"update": [], "adjust": {"mounts": []}}).encode(), 400,
                             "adjust: unknown field"),
    "update not a list": (json.dumps({"update": {"container_id": RUNNING}}).encode(), 400,
                          "update: expected a list"),
    "100,000 nested lists": (b"[" * 100_000 + b"]" * 100_000, 400, "body is not JSON"),
    "10,001 updates": (json.dumps({"update": [{"container_id": "x"}] * 10_001}).encode(), 413,
                       "more than 10000 updates"),
    "a 2 MiB body": (b" " * (2 * MIB), 413, f"body larger than {MIB} bytes"),
}


@pytest.fixture
async def control(workdir: Path) -> AsyncIterator[tuple[Stack, httpx.AsyncClient]]:
    async with stack(workdir, json_reply({}), seed=(PODS, CONTAINERS)) as s:
        transport = httpx.AsyncHTTPTransport(uds=str(s.bridge.control_sock))
        async with httpx.AsyncClient(transport=transport, base_url="http://bridge",
                                     timeout=5) as client:
            yield s, client


@pytest.mark.parametrize("name", UNSOLICITED)
async def test_unsolicited_updates_are_checked(
        name: str, control: tuple[Stack, httpx.AsyncClient],
        caplog: pytest.LogCaptureFixture) -> None:
    body, status, error = UNSOLICITED[name]
    s, client = control
    with caplog.at_level(logging.INFO):
        answer = await client.post("/v1/updates", content=body,
                                   headers={"content-type": "application/json"})
    assert (answer.status_code, s.runtime.updates) == (status, [])
    assert error in answer.json()["error"]
    check_log_lines(caplog.records)
    assert s.runtime.state.containers[RUNNING].linux.resources == CONTAINERS[0].linux.resources


async def test_unsolicited_resources_go_through_rdt_and_blockio_are_reported_dropped(
        control: tuple[Stack, httpx.AsyncClient]) -> None:
    """The control API takes rdt and blockio classes; on containerd 2.1.9 updates go through
    CRI, which cannot carry them (nor does containerd's own UpdateContainers apply them)."""
    s, client = control
    update = _resources(cpu={"shares": 300}, rdt_class="gold", blockio_class="slow")
    answer = await client.post("/v1/updates", json={"update": [update]})
    assert (answer.status_code, answer.json()) == (200, {"failed": [], "dropped": [
        {"container_id": RUNNING, "fields": ["blockio_class", "rdt_class"]}]})
    resources = s.runtime.state.containers[RUNNING].linux.resources
    assert resources.cpu.shares.value == 300
    assert not resources.HasField("rdt_class") and not resources.HasField("blockio_class")


async def _chunks(total: int, then_hang: bool) -> AsyncIterator[bytes]:
    piece = b" " * (64 * 1024)
    for _ in range(total // len(piece)):
        yield piece
    if then_hang:
        await asyncio.Event().wait()


@pytest.mark.parametrize("then_hang", [False, True], ids=["complete", "never-ending"])
async def test_a_huge_chunked_body_is_refused_without_waiting_for_its_end(
        then_hang: bool, control: tuple[Stack, httpx.AsyncClient]) -> None:
    """No content-length: the API stops reading at 1 MiB instead of buffering the rest."""
    s, _ = control
    reader, writer = await asyncio.open_unix_connection(str(s.bridge.control_sock))
    writer.write(b"POST /v1/updates HTTP/1.1\r\nhost: bridge\r\n"
                 b"content-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n")

    async def send() -> None:
        async for piece in _chunks(3 * MIB // 2, then_hang):
            writer.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
    sending = asyncio.ensure_future(send())
    try:
        async with asyncio.timeout(5):
            status_line = await reader.readline()
    finally:
        sending.cancel()
        writer.close()
        with contextlib.suppress(asyncio.CancelledError, ConnectionError):
            await sending
    assert status_line.startswith(b"HTTP/1.1 413"), status_line
    assert s.runtime.updates == []


# -- plain http, TLS, bearer tokens -------------------------------------------------------


@pytest.mark.processes
def test_plain_http_to_a_remote_host_is_refused_by_validate_config(workdir: Path) -> None:
    """The real command line: exit 2 naming the key; allowed with allow_insecure_http."""
    hook = {"name": "remote", "url": "http://10.1.2.3:8080/v1/policy"}
    config = workdir / "remote.yaml"
    config.write_text(json.dumps({"webhooks": [hook]}))
    allowed = workdir / "allowed.yaml"
    allowed.write_text(json.dumps({"webhooks": [{**hook, "allow_insecure_http": True}]}))
    runs = [subprocess.run([sys.executable, "-m", "bridge", "validate-config", str(path)],
                           capture_output=True, text=True, timeout=30, cwd=REPO)
            for path in (config, allowed)]
    assert runs[0].returncode == 2
    assert "webhooks[0].url: plain http to non-loopback host '10.1.2.3'" in runs[0].stderr
    assert "allow_insecure_http" in runs[0].stderr
    assert (runs[1].returncode, runs[1].stdout.strip()) == (0, f"{allowed}: ok")


@pytest.mark.parametrize(("url", "refused"), [
    ("http://10.0.0.1/p", True),
    ("http://policy.example.com/p", True),
    ("http://localhost.evil.example/p", True),
    ("http://127.0.0.1.nip.io/p", True),
    ("http://0.0.0.0:80/p", True),
    ("http://[::ffff:10.0.0.1]/p", True),
    ("http://2130706433/p", True),  # 127.0.0.1 as one number: not read as an address
    ("http://127.0.0.1:8080/p", False),
    ("http://127.9.9.9/p", False),
    ("http://[::1]:8080/p", False),
    ("http://localhost:8080/p", False),
    ("https://policy.example.com/p", False),
])
def test_which_http_urls_are_refused(url: str, refused: bool, workdir: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    config = workdir / "config.yaml"
    config.write_text(json.dumps({"webhooks": [{"name": "p", "url": url}]}))
    assert bridge_main(["validate-config", str(config)]) == (2 if refused else 0)
    assert ("webhooks[0].url: plain http" in capsys.readouterr().err) == refused
    if refused:
        with pytest.raises(ConfigError) as exc:
            webhook_from_url(url)  # --policy-url
        assert exc.value.key == "--policy-url"
        parse_webhooks([{"name": "p", "url": url, "allow_insecure_http": True}])


@pytest.fixture(scope="module")
def pki() -> Iterator[Pki]:
    with temporary_pki() as made:
        yield made


TOKEN = "s3cret-token"


def _bearer(token: str) -> Behaviour:
    """Answers only requests carrying `Authorization: Bearer <token>`."""
    async def behaviour(request: HttpRequest, writer: asyncio.StreamWriter) -> None:
        if request.headers.get("authorization") == f"Bearer {token}":
            await json_reply(VALID)(request, writer)
        else:
            await reply(401, b"bad token", content_type="text/plain")(request, writer)
    return behaviour


@contextlib.asynccontextmanager
async def _tls_stack(workdir: Path, pki: Pki, token: str, ca: Path) -> AsyncIterator[Stack]:
    token_file = workdir / "token"
    token_file.write_text(token + "\n")  # the trailing newline is not part of it
    policy = RawPolicy(_bearer(TOKEN),
                       server_context(pki.server_cert, pki.server_key, client_ca=pki.ca))
    tls = {"ca_file": str(ca), "cert_file": str(pki.client_cert),
           "key_file": str(pki.client_key)}
    async with stack(workdir, policy, tcp=True, scheme="https", tls=tls,
                     bearer_token_file=str(token_file)) as s:
        yield s


@pytest.mark.processes
async def test_tls_client_certificate_and_bearer_token_end_to_end(workdir: Path,
                                                                  pki: Pki) -> None:
    async with _tls_stack(workdir, pki, TOKEN, pki.ca) as s:
        results = await both(s)
    for result in results.values():
        assert result.ok and result.container is not None, result.error
        assert "DECIDED=1" in result.container.env
    assert [r.headers["authorization"] for r in s.policy.requests] == [f"Bearer {TOKEN}"] * 2


@pytest.mark.processes
async def test_a_wrong_bearer_token_is_an_http_failure(workdir: Path, pki: Pki,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO):
        async with _tls_stack(workdir, pki, "guessed", pki.ca) as s:
            results = await both(s)
    check_failure(s, caplog.records, results, "http_status", "HTTP 401: bad token")


@pytest.mark.processes
async def test_a_wrong_ca_fails_before_the_token_is_sent(workdir: Path, pki: Pki,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO):
        async with _tls_stack(workdir, pki, TOKEN, pki.other_ca) as s:
            results = await both(s)
    check_failure(s, caplog.records, results, "connect_error", "CERTIFICATE_VERIFY_FAILED")
    assert s.policy.requests == []


# -- logs ------------------------------------------------------------------------------

# Every character here costs 2 to 12 bytes once escaped into a JSON log line.
NASTY = '"\\\u2603\U0001f600\n\u0007'
GIANT = 280_000  # characters: ~900 KB of reply in UTF-8


def _nasty(chars: int) -> str:
    return (NASTY * (chars // len(NASTY) + 1))[:chars]


def _reply_bytes(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, ensure_ascii=False).encode()


def _sized(doc: dict[str, Any]) -> Behaviour:
    body = _reply_bytes(doc)
    assert 800_000 < len(body) < MIB, len(body)  # ~900 KB, under the reply cap
    return reply(200, body)


FLOODS: dict[str, tuple[dict[str, Any], str]] = {
    "100 giant warnings": ({**VALID, "warnings": [_nasty(2_800)] * 100}, "ok"),
    "a giant reject reason": ({"reject": {"reason": _nasty(GIANT)}}, "rejected"),
    "a giant unknown key": ({_nasty(GIANT): 1}, "schema_violation"),
    "a giant annotation key with a wrong type": (
        {"adjust": {"annotations": {_nasty(GIANT): 1}}}, "schema_violation"),
    "a giant enum value": ({"adjust": {"linux": {"io_priority": {"class": _nasty(GIANT)}}}},
                           "schema_violation"),
    "a giant env name": ({"adjust": {"env": [{"key": _nasty(GIANT) + "=", "value": ""}]}},
                         "invalid_value"),
    "3000 evictions": ({"evict": [{"container_id": RUNNING, "reason": _nasty(60)}] * 3000},
                       "no_change"),
}
# Each webhook evicts a container inside its own scope.
IN_SCOPE = {"3000 evictions": {
    "evict": [{"container_id": RUNNING_STRICT, "reason": _nasty(60)}] * 3000}}


def _sized_by_namespace(doc: dict[str, Any], strict_doc: dict[str, Any]) -> Behaviour:
    """`_sized(doc)`, but `strict_doc` for the events of the strict webhook's namespace."""
    default, strict = _sized(doc), _sized(strict_doc)

    async def behaviour(request: HttpRequest, writer: asyncio.StreamWriter) -> None:
        namespace = request.json()["pod"]["namespace"]
        await (strict if namespace == NAMESPACES[STRICT] else default)(request, writer)
    return behaviour


@pytest.mark.parametrize("name", FLOODS)
async def test_a_900_kb_reply_cannot_flood_the_log(name: str, workdir: Path,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    doc, outcome = FLOODS[name]
    with caplog.at_level(logging.DEBUG):
        behaviour = _sized_by_namespace(doc, IN_SCOPE.get(name, doc))
        async with stack(workdir, behaviour, seed=(PODS + STRICT_PODS,
                                                   CONTAINERS + STRICT_CONTAINERS)) as s:
            results = await both(s)
    lines = check_log_lines(caplog.records)
    calls = [json.loads(line) for line in lines if '"webhook":' in line]
    evictions = [c for c in calls if c["msg"].startswith("eviction requested")]
    calls = [c for c in calls if c not in evictions]
    # One line per call (two calls), whatever the reply held; all evictions in one more.
    assert len(calls) == 2, [c["msg"] for c in calls]
    assert {c["outcome"] for c in calls} == {outcome}
    assert [e["evictions"] for e in evictions] == ([3000] * 2 if evictions else [])
    for result in results.values():
        assert len(result.error or "") < 4200  # the runtime's error message is bounded too
    if name == "100 giant warnings":
        assert {c["level"] for c in calls} == {"warning"}
        assert all(c["warnings"].startswith('["') and c["warnings"].endswith(" chars)")
                   for c in calls)


async def test_a_shadow_reply_cannot_flood_the_log(workdir: Path,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    """Shadow lines carry the most policy text: diffs, rejection and warnings at once."""
    doc = {"adjust": {"env": [{"key": f"K{i}", "value": _nasty(700)} for i in range(100)]},
           "update": [_resources(unified={"memory.high": _nasty(70_000)})],
           "reject": {"reason": _nasty(70_000)}, "warnings": [_nasty(700)] * 100}

    def shadow(url: str) -> Any:
        return parse_webhooks([{"name": "shadow", "url": url, "mode": "shadow",
                                "events": ["CreateContainer"]}])
    with caplog.at_level(logging.INFO):
        async with stack(workdir, _sized(doc), seed=(PODS, CONTAINERS), hooks=shadow) as s:
            result = await s.run(LENIENT)
    no_change(result)
    lines = check_log_lines(caplog.records)
    [line] = [json.loads(x) for x in lines if '"shadow webhook call"' in x]
    assert line["outcome"] == "shadow_rejected"
    assert {"would_adjust", "would_update", "would_reject", "warnings"} <= set(line)


def test_more_than_100_warnings_is_a_schema_violation() -> None:
    scope = Scope("CreateContainer", frozenset(), lambda _: False)
    with pytest.raises(WebhookFailure, match="warnings: more than 100 entries"):
        parse_reply({"warnings": ["w"] * 101}, "p", scope)
