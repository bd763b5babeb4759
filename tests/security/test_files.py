"""Issue 43, item 5 (the squatting findings): files and socket paths another user controls.

Played as the attacker (a second, unprivileged uid) against the real programs:
- a policy socket the attacker put at the policy's path in a world-writable (sticky, as /tmp)
  directory gets no request, so no container's secret env, and its reply (an env var it sets;
  an ordinary one, which the default allow list would let through) is never applied: the
  bridge checks the server's uid (SO_PEERCRED) before writing a byte, and
  refuses to start while the squatter's socket is there;
- a `bearer_token_file` swapped for the attacker's symlink to a root-only 0600 file is not
  read, so not sent to the attacker's loopback listener;
- a config or rules file the attacker owns, or one anyone may write, is refused by
  `validate-config`, by `--check-rules` and at start-up (exit 2, naming the path and owner);
- the policy server's `--uds` and the bridge's control socket squatted by the attacker: exit 2
  naming the path and the owner (the bridge used to exit 1).
Each check is shown failing on a mutated input (mode 0644 passes, 0664 and 0666 do not; root
passes, the attacker does not).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridge.cli import main as bridge_main
from bridge.contract.catalogue import EVENTS_BY_RPC
from bridge.webhooks import client
from policy_server.main import main as policy_main
from tests.hardening.policy_http import json_reply
from tests.hardening.policy_stack import LENIENT, STRICT, both, check_failure, specs, stack
from tests.hardening.processes import POLICY_SERVER
from tests.integration.harness import pod_and_container
from tests.security.attacker import PYTHON, Attacker
from tests.waiting import WaitTimeout, wait_until

pytestmark = [pytest.mark.processes, pytest.mark.timeout(120)]

REPO = Path(__file__).resolve().parents[2]
POLICY_MODULE = REPO / "tests" / "hardening" / "env_policy.py"
SECRET_ENV = "STRIPE_SECRET_KEY=sk_live_do_not_leak"
ROOT_ONLY = "ROOT-ONLY-SECRET-CONTENTS"
START_TIMEOUT_S = 60.0

# The attacker's HTTP server: standard library only, run as the attacker. It records every byte
# it receives (one file per connection that sent anything) and answers each request with an
# adjustment that would route the container's traffic through the attacker.
SQUATTER = r'''
import json, os, socket, sys, threading
address, record_dir = sys.argv[1:3]
if address.startswith("unix:"):
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(address[5:])
    os.chmod(address[5:], 0o777)
    where = address
else:
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    where = str(srv.getsockname()[1])
srv.listen(64)
REPLY = json.dumps({"adjust": {"env": [{"key": "SQUATTER_SET",
                                          "value": "by-the-attacker"}]}}).encode()
count = 0
def serve(conn, n):
    data = b""
    conn.settimeout(5)
    try:
        while True:
            head, sep, body = data.partition(b"\r\n\r\n")
            if sep:
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    k, _, v = line.partition(b":")
                    if k.strip().lower() == b"content-length":
                        length = int(v)
                if len(body) >= length:
                    break
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
        if data:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\nConnection: close\r\n\r\n%s"
                         % (len(REPLY), REPLY))
    except OSError:
        pass
    finally:
        conn.close()
        if data:
            with open(os.path.join(record_dir, f"request-{n}"), "wb") as f:
                f.write(data)
with open(os.path.join(record_dir, "ready"), "w") as f:
    f.write(where)
while True:
    conn, _ = srv.accept()
    count += 1
    threading.Thread(target=serve, args=(conn, count), daemon=True).start()
'''


class Squatter:
    """The attacker's server, a process of the attacker's uid; `received()` is every request
    it got, as bytes."""

    def __init__(self, evil: Attacker, address: str, record_dir: Path) -> None:
        self.record_dir = record_dir
        record_dir.mkdir(mode=0o777)
        record_dir.chmod(0o777)  # the attacker writes its records here
        self.proc = subprocess.Popen(
            [PYTHON, "-I", "-c", SQUATTER, address, str(record_dir)], user=evil.uid,
            group=evil.gid, extra_groups=[], cwd="/", env={"PATH": "/usr/bin:/bin"},
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_until((record_dir / "ready").exists, what="the squatter starts",
                       timeout_s=START_TIMEOUT_S, proc=self.proc, details=self.stderr)
        except WaitTimeout:
            self.stop()
            raise
        self.where = (record_dir / "ready").read_text()

    def received(self) -> list[bytes]:
        return [p.read_bytes() for p in sorted(self.record_dir.glob("request-*"))]

    def stderr(self) -> str:
        if self.proc.poll() is None:
            return ""
        return self.proc.stderr.read().decode() if self.proc.stderr else ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()  # our own child, by its PID
        self.proc.wait(timeout=30)
        if self.proc.stderr:
            self.proc.stderr.close()


@pytest.fixture
def shared(workdir: Path) -> Path:
    """A directory everyone may write, sticky, as /tmp is."""
    d = workdir / "shared"
    d.mkdir()
    d.chmod(0o1777)
    return d


@pytest.fixture
def squatters(evil: Attacker, workdir: Path) -> Iterator[list[Squatter]]:
    started: list[Squatter] = []
    yield started
    for squatter in started:
        squatter.stop()


def _squat(evil: Attacker, workdir: Path, squatters: list[Squatter], address: str) -> Squatter:
    squatter = Squatter(evil, address, workdir / f"records-{len(squatters)}")
    squatters.append(squatter)
    return squatter


def _bridge_run(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`nri-webhook-bridge run` as root, expected to refuse before it connects anywhere; one
    that starts instead is stopped at the timeout (and the test then fails on its code)."""
    argv = [sys.executable, "-m", "bridge", "run", "--nri-socket", str(workdir / "no-nri.sock"),
            *args]
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=START_TIMEOUT_S,
                              check=False)
    except subprocess.TimeoutExpired as exc:
        out = exc.stderr.decode() if isinstance(exc.stderr, bytes) else str(exc.stderr)
        return subprocess.CompletedProcess(argv, -9, "", f"still running: {out}")


def _policy_run(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [str(POLICY_SERVER), "--no-koordinator", "--policy-module", str(POLICY_MODULE), *args]
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=START_TIMEOUT_S,
                              check=False)
    except subprocess.TimeoutExpired as exc:
        out = exc.stderr.decode() if isinstance(exc.stderr, bytes) else str(exc.stderr)
        return subprocess.CompletedProcess(argv, -9, "", f"still running: {out}")


def _stack_dir(workdir: Path) -> Path:
    d = workdir / "stack"
    d.mkdir(exist_ok=True)
    return d


def _owned_by(evil: Attacker) -> str:
    return f"owned by uid {evil.uid} (nwb-attacker)"


def _config(path: Path, webhooks: list[dict[str, object]], control: Path | None = None) -> Path:
    doc: dict[str, object] = {"webhooks": webhooks}
    if control is not None:
        doc["control"] = {"socket": str(control)}
    path.write_text(json.dumps(doc))
    path.chmod(0o644)
    return path


# -- a squatted policy socket -----------------------------------------------------------------


async def test_a_squatted_policy_socket_gets_no_request_and_no_secret(
        evil: Attacker, workdir: Path, shared: Path, squatters: list[Squatter],
        caplog: pytest.LogCaptureFixture) -> None:
    sock = shared / "policy.sock"
    squatter = _squat(evil, workdir, squatters, f"unix:{sock}")
    assert os.lstat(sock).st_uid == evil.uid

    # The bridge (the real webhook path, the real client) calls the policy at that path under
    # both failure policies.
    caplog.set_level(logging.INFO)
    async with stack(_stack_dir(workdir), json_reply({}),
                     hooks=lambda _: specs(f"unix://{sock}/v1/policy")) as s:
        results = await both(s)
    assert squatter.received() == [], "the squatter got a request"
    check_failure(s, caplog.records, results, "connect_error",
                  f"{sock} is served by uid {evil.uid} (nwb-attacker), not by uid 0 (root)")
    lenient = results[LENIENT]
    assert lenient.container is None or not any(
        "SQUATTER_SET" in e for e in lenient.container.env), lenient
    assert "no request sent" in (results[STRICT].error or "")


async def test_the_secret_env_never_reaches_the_squatter(
        evil: Attacker, workdir: Path, shared: Path, squatters: list[Squatter]) -> None:
    """The same, with the secret in the container's env, checked in what the squatter got."""
    sock = shared / "policy.sock"
    squatter = _squat(evil, workdir, squatters, f"unix:{sock}")
    async with stack(_stack_dir(workdir), json_reply({}),
                     hooks=lambda _: specs(f"unix://{sock}/v1/policy")) as s:
        pod, container = pod_and_container("secret-holder", "default")
        container.env.append(SECRET_ENV)
        result = await s.runtime.run_event(EVENTS_BY_RPC["CreateContainer"], pod, container)
    assert result.ok, result.error  # lenient: Ignore
    received = b"".join(squatter.received())
    assert b"STRIPE_SECRET_KEY" not in received and received == b""


def test_the_bridge_refuses_to_start_while_a_squatter_holds_the_policy_socket(
        evil: Attacker, workdir: Path, shared: Path, squatters: list[Squatter]) -> None:
    sock = shared / "policy.sock"
    squatter = _squat(evil, workdir, squatters, f"unix:{sock}")
    config = _config(workdir / "bridge.yaml", [{"name": "p", "url": f"unix://{sock}/v1/p"}])
    done = _bridge_run(workdir, "--config", str(config),
                       "--control-socket", str(workdir / "control.sock"))
    assert done.returncode == 2, done
    assert f"webhooks[0].url: {sock}: {_owned_by(evil)}" in done.stderr
    validate = subprocess.run([sys.executable, "-m", "bridge", "validate-config", str(config)],
                              capture_output=True, text=True, timeout=60, check=False)
    assert validate.returncode == 2 and f"{sock}: {_owned_by(evil)}" in validate.stderr
    assert squatter.received() == []


def test_the_policy_server_refuses_a_squatted_socket_naming_its_owner(
        evil: Attacker, workdir: Path, shared: Path, squatters: list[Squatter]) -> None:
    sock = shared / "policy.sock"
    _squat(evil, workdir, squatters, f"unix:{sock}")
    done = _policy_run("--uds", str(sock))
    assert done.returncode == 2, done
    assert f"--uds {sock}: {_owned_by(evil)}" in done.stderr, done.stderr
    assert os.lstat(sock).st_uid == evil.uid  # left alone


def test_the_bridge_refuses_a_squatted_control_socket_naming_its_owner(
        evil: Attacker, workdir: Path, shared: Path, squatters: list[Squatter]) -> None:
    control = shared / "control.sock"
    _squat(evil, workdir, squatters, f"unix:{control}")
    done = _bridge_run(workdir, "--control-socket", str(control))
    assert done.returncode == 2, done
    assert f"control.socket: {control}: {_owned_by(evil)}" in done.stderr, done.stderr
    assert os.lstat(control).st_uid == evil.uid  # neither used nor replaced


# -- a bearer token swapped for a symlink -------------------------------------------------------


def _root_only_secret(workdir: Path) -> Path:
    private = workdir / "private"
    private.mkdir(mode=0o700)
    secret = private / "secret"
    secret.write_text(ROOT_ONLY)
    secret.chmod(0o600)
    return secret


def _plant_link(evil: Attacker, link: Path, target: Path) -> None:
    done = evil.run("import os, sys; os.symlink(sys.argv[2], sys.argv[1])", str(link),
                    str(target))
    assert done.returncode == 0, done.stderr
    assert os.lstat(link).st_uid == evil.uid
    assert not evil.can_read(target)  # the attacker could not read it itself


async def test_a_token_swapped_for_a_symlink_is_not_sent(
        evil: Attacker, workdir: Path, shared: Path, squatters: list[Squatter],
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = _root_only_secret(workdir)
    token = shared / "token"
    token.write_text("the-real-token")
    token.chmod(0o600)
    squatter = _squat(evil, workdir, squatters, "tcp")  # the attacker's loopback listener
    url = f"http://127.0.0.1:{squatter.where}/v1/policy"
    monkeypatch.setattr(client, "TOKEN_REFRESH_S", 0.0)  # re-read at every call
    caplog.set_level(logging.INFO)
    async with stack(_stack_dir(workdir), json_reply({}),
                     hooks=lambda _: specs(url, bearer_token_file=str(token))) as s:
        # Rotation: the token goes away for a moment; the attacker plants its link.
        token.unlink()
        _plant_link(evil, token, secret)
        results = await both(s)
    received = b"".join(squatter.received())
    assert ROOT_ONLY.encode() not in received and received == b""
    check_failure(s, caplog.records, results, "connect_error",
                  f"bearer_token_file not sent: {token}: {_owned_by(evil)}")


def test_the_bridge_refuses_to_start_with_a_planted_token_link(
        evil: Attacker, workdir: Path, shared: Path, squatters: list[Squatter]) -> None:
    secret = _root_only_secret(workdir)
    token = shared / "token"
    _plant_link(evil, token, secret)
    squatter = _squat(evil, workdir, squatters, "tcp")
    config = _config(workdir / "bridge.yaml", [{
        "name": "p", "url": f"http://127.0.0.1:{squatter.where}/v1/p",
        "bearer_token_file": str(token)}])
    done = _bridge_run(workdir, "--config", str(config),
                       "--control-socket", str(workdir / "control.sock"))
    assert done.returncode == 2, done
    assert f"webhooks[0].bearer_token_file: {token}: {_owned_by(evil)}" in done.stderr
    assert squatter.received() == []


# -- config and rules files -----------------------------------------------------------------------

# (owner, mode, the problem or None): each check passing and failing on a mutation of one input
FILE_CASES = [
    ("root", 0o644, None),
    ("root", 0o600, None),
    ("root", 0o664, "file writable by group 0 (mode 0664)"),
    ("root", 0o666, "file writable by others (mode 0666)"),
    ("attacker", 0o644, "owned by uid {uid} (nwb-attacker)"),
    ("attacker", 0o666, "owned by uid {uid} (nwb-attacker)"),
]


def _owned(path: Path, evil: Attacker, owner: str, mode: int) -> None:
    if owner == "attacker":
        os.chown(path, evil.uid, evil.gid)
    path.chmod(mode)


@pytest.mark.parametrize(("owner", "mode", "problem"), FILE_CASES)
def test_validate_config_reports_a_config_file_another_user_controls(
        evil: Attacker, workdir: Path, owner: str, mode: int, problem: str | None,
        capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(workdir / "bridge.yaml", [])
    _owned(config, evil, owner, mode)
    code = bridge_main(["validate-config", str(config)])
    out = capsys.readouterr()
    if problem is None:
        assert code == 0 and out.out.strip() == f"{config}: ok", out
    else:
        assert code == 2, out
        assert f"{config}: invalid: --config: {config}: {problem.format(uid=evil.uid)}" in out.err


def test_the_bridge_refuses_to_start_with_a_0666_config_of_the_attacker(
        evil: Attacker, workdir: Path) -> None:
    config = _config(workdir / "bridge.yaml", [])
    _owned(config, evil, "attacker", 0o666)
    done = _bridge_run(workdir, "--config", str(config),
                       "--control-socket", str(workdir / "control.sock"))
    assert done.returncode == 2, done
    assert f"{config}: {_owned_by(evil)}" in done.stderr


def test_validate_config_lists_every_file_problem_with_its_path(
        evil: Attacker, workdir: Path, shared: Path, capsys: pytest.CaptureFixture[str]) -> None:
    token = shared / "token"
    token.write_text("t")
    _owned(token, evil, "attacker", 0o600)
    open_dir = workdir / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    ca = open_dir / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    config = _config(workdir / "bridge.yaml", [
        {"name": "a", "url": "http://127.0.0.1:1/p", "bearer_token_file": str(token)},
        {"name": "b", "url": "https://127.0.0.1:1/p", "tls": {"ca_file": str(ca)}},
        {"name": "c", "url": f"unix://{open_dir}/p.sock/v1"},
    ])
    assert bridge_main(["validate-config", str(config)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"{config}: invalid: webhooks[0].bearer_token_file: {token}: {_owned_by(evil)}, "
        "not by uid 0 (root)",
        f"{config}: invalid: webhooks[1].tls.ca_file: {ca}: {open_dir}: directory writable "
        "by others (mode 0777)",
        f"{config}: invalid: webhooks[2].url: {open_dir}/p.sock: {open_dir}: directory "
        "writable by others (mode 0777)",
    ]


RULES = "defaults: {}\n"


@pytest.mark.parametrize(("owner", "mode", "problem"), FILE_CASES)
def test_check_rules_reports_a_rules_file_another_user_controls(
        evil: Attacker, workdir: Path, owner: str, mode: int, problem: str | None,
        capsys: pytest.CaptureFixture[str]) -> None:
    rules = workdir / "rules.yaml"
    rules.write_text((REPO / "deploy" / "kubernetes" / "base" / "rules.yaml").read_text())
    _owned(rules, evil, owner, mode)
    code = policy_main(["--check-rules", "--rules", str(rules)])
    out = capsys.readouterr()
    if problem is None:
        assert code == 0, out
        json.loads(out.out)
    else:
        assert code == 2, out
        assert f"--rules {rules}: {problem.format(uid=evil.uid)}" in out.err


def test_the_policy_server_refuses_to_start_with_files_the_attacker_controls(
        evil: Attacker, workdir: Path) -> None:
    rules = workdir / "rules.yaml"
    rules.write_text(RULES)
    _owned(rules, evil, "attacker", 0o666)
    done = _policy_run("--uds", str(workdir / "p.sock"), "--rules", str(rules))
    assert done.returncode == 2, done
    assert f"--rules {rules}: {_owned_by(evil)}" in done.stderr
    assert not (workdir / "p.sock").exists()
    # A --policy CEL directory with one of the attacker's files in it, and a policy module
    # (code run as root) anyone may write.
    cel = workdir / "cel"
    cel.mkdir()
    policy = cel / "policy.yaml"
    policy.write_text("{}\n")
    _owned(policy, evil, "attacker", 0o644)
    module = workdir / "module.py"
    module.write_text(POLICY_MODULE.read_text())
    module.chmod(0o666)
    done = subprocess.run(
        [str(POLICY_SERVER), "--no-koordinator", "--uds", str(workdir / "p.sock"),
         "--policy", f"cel={cel}", "--policy-module", str(module)],
        capture_output=True, text=True, timeout=START_TIMEOUT_S, check=False)
    assert done.returncode == 2, done
    assert f"--policy {cel}: {policy}: {_owned_by(evil)}" in done.stderr, done.stderr
    assert f"--policy-module {module}: file writable by others (mode 0666)" in done.stderr


# -- read-only mounts: the mode is not what anyone can do ----------------------------------------


def test_a_read_only_mount_of_an_open_directory_passes(workdir: Path) -> None:
    """A Kubernetes ConfigMap volume's directory is 0777 but mounted read-only."""
    from bridge import file_trust

    volume = workdir / "volume"
    volume.mkdir()
    (volume / "config.yaml").write_text("webhooks: []\n")
    volume.chmod(0o777)
    with pytest.raises(file_trust.UntrustedPath, match="directory writable by others"):
        file_trust.read_trusted(str(volume / "config.yaml"))  # read-write: refused
    subprocess.run(["mount", "--bind", str(volume), str(volume)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(volume)], check=True)
        assert file_trust.read_trusted(str(volume / "config.yaml")) == b"webhooks: []\n"
    finally:
        subprocess.run(["umount", str(volume)], check=True)


async def test_a_policy_uid_listed_in_peer_uids_is_served(
        evil: Attacker, workdir: Path, shared: Path, squatters: list[Squatter]) -> None:
    """The check's mutation: the same socket, its uid now trusted (`peer_uids`), gets the
    requests, and its reply is applied: what every squatter got before the check."""
    sock = shared / "policy.sock"
    squatter = _squat(evil, workdir, squatters, f"unix:{sock}")
    async with stack(_stack_dir(workdir), json_reply({}),
                     hooks=lambda _: specs(f"unix://{sock}/v1/policy",
                                           peer_uids=[evil.uid])) as s:
        results = await both(s)
    assert len(squatter.received()) == 2
    for result in results.values():
        assert result.ok and result.container is not None, result.error
        assert "SQUATTER_SET=by-the-attacker" in result.container.env
