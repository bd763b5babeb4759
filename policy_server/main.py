"""``nri-policy-server``: command line, listening socket, uvicorn.

Listens on a Unix socket by default (created with mode 0600, or 0660 with ``--socket-mode``;
uvicorn's own ``uds`` option would make it 0666; peers checked by their credentials,
``--allow-uid``/``--allow-gid``) or on TCP with ``--host/--port``, which needs mutual TLS
(``--tls-*``) or ``--bearer-token-file``, or ``--insecure``; with ``--metrics-address`` also
serves ``GET /metrics`` alone on a TCP address for Prometheus. Every listener is bounded
(bridge.listening: body size, header and idle timeouts, a connection cap).
Logs in the bridge's line formats (``--log-format text|json``, bridge.process_setup.logformat),
uvicorn's own lines included. Startup errors (bad rules file, bad policy module, socket in
use) print one line and exit 2.
"""

from __future__ import annotations

from bridge.process_setup import stop_signals

if __name__ == "__main__":
    # python -m policy_server.main: the stop signals are caught before the imports below
    # (about a second, longer on a busy machine), not left to their default action (-15).
    # The script nri-policy-server does the same in policy_server.launcher.
    stop_signals.catch()
    stop_signals.checkpoint("entry")

import argparse
import asyncio
import contextlib
import gc
import json
import logging
import socket
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import uvicorn
import uvloop

from bridge.listening.auth_files import load_token, uvicorn_tls
from bridge.listening.http_guard import GuardSettings, allowed_names
from bridge.listening.listener_config import (
    DEFAULT_HEADER_TIMEOUT_S,
    DEFAULT_MAX_CONNECTIONS,
    MIB,
    Access,
    Bounds,
    ListenerConfigError,
    TlsFiles,
    check_tcp_access,
)
from bridge.listening.peer_creds import default_rule
from bridge.listening.prompt_server import PromptServer
from bridge.process_setup.logformat import LOG_FORMATS, handler
from bridge.transport import listen
from policy_server import file_checks
from policy_server.assemble import Assembly, Listener, assemble
from policy_server.bridge_link.control_client import BridgeTrust
from policy_server.exceptions import PolicyServerError
from policy_server.node.cgroup_layout import DEFAULT_CGROUP_ROOT, CgroupVersion
from policy_server.node.cpu_weight import WeightSetting
from policy_server.node.execution import ExecutorMode
from policy_server.node.node_topology import DEFAULT_SYS_ROOT, read_topology
from policy_server.node.pod_confinement import DEFAULT_KUBELET_CGROUP_ROOT
from policy_server.node.procfs import DEFAULT_PROC_ROOT
from policy_server.node.reconciler import DEFAULT_RECONCILE_INTERVAL_S
from policy_server.node.resctrl_fs import DEFAULT_RESCTRL_ROOT
from policy_server.node.unit_properties import DEFAULT_SYSTEM_BUS, PropertiesMode
from policy_server.policies import (
    DEFAULT_POLICY,
    build_builtin,
    describe_builtins,
    parse_policy_arg,
)
from policy_server.sdk.node_facts import NodeFacts
from policy_server.service import (
    BRIDGE_START_WAIT_S,
    POLL_INTERVAL_S,
    ServerOptions,
)

log = logging.getLogger(__name__)

DEFAULT_UDS = "/run/nri-policy-server/policy.sock"
SOCKET_MODES = {"0600": 0o600, "0660": 0o660}
# A Synchronize of a 5,000-pod node (one container each) measured 19.3 MiB
# (docs/performance.md#listener-bounds): 32 MiB leaves room; every other request is a few KB.
POLICY_BODY_BYTES = 32 * MIB
OTHER_BODY_BYTES = 1 * MIB


class StartupError(PolicyServerError):
    """Something the operator must fix before the server can start."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="nri-policy-server",
        description="Serve NRI policies (koordinator-qos by default, built-in ones enabled with "
        "--policy and --policy-module ones) over HTTP for nri-webhook-bridge.",
    )
    listen = p.add_argument_group("listening (Unix socket by default)")
    listen.add_argument("--uds", metavar="PATH", help=f"Unix socket path (default {DEFAULT_UDS})")
    listen.add_argument("--host", help="listen on TCP at this address instead (e.g. 127.0.0.1)")
    listen.add_argument("--port", type=int, help="TCP port (with --host)")
    listen.add_argument(
        "--socket-mode",
        choices=sorted(SOCKET_MODES),
        default="0600",
        help="permissions of the Unix socket (default 0600)",
    )
    listen.add_argument(
        "--allow-uid",
        metavar="UID",
        type=int,
        action="append",
        help="a uid the Unix socket serves (repeatable; default root and our own uid)",
    )
    listen.add_argument(
        "--allow-gid",
        metavar="GID",
        type=int,
        action="append",
        help="a gid whose members the Unix socket serves (repeatable; default the socket's "
        "group)",
    )
    listen.add_argument(
        "--tls-cert-file", metavar="FILE", help="TCP: serve TLS with this certificate"
    )
    listen.add_argument("--tls-key-file", metavar="FILE", help="TCP: its private key")
    listen.add_argument(
        "--tls-client-ca-file",
        metavar="FILE",
        help="TCP: clients must present a certificate this CA signed (mutual TLS)",
    )
    listen.add_argument(
        "--bearer-token-file",
        metavar="FILE",
        help="TCP: clients must send Authorization: Bearer <file content>",
    )
    listen.add_argument(
        "--insecure",
        action="store_true",
        help="allow TCP without authentication: every user who reaches the port can then "
        "make the server write node state as root; logged loudly",
    )
    listen.add_argument(
        "--allow-host",
        metavar="NAME",
        action="append",
        default=[],
        help="TCP: a Host/Origin name clients may use besides loopback and --host (repeatable)",
    )
    listen.add_argument(
        "--header-timeout",
        metavar="SECONDS",
        type=float,
        default=DEFAULT_HEADER_TIMEOUT_S,
        help=f"a request's headers must arrive within this (default {DEFAULT_HEADER_TIMEOUT_S:g})",
    )
    listen.add_argument(
        "--max-connections",
        metavar="N",
        type=int,
        default=DEFAULT_MAX_CONNECTIONS,
        help=f"connections one listener holds at once (default {DEFAULT_MAX_CONNECTIONS})",
    )
    p.add_argument(
        "--rules",
        metavar="FILE",
        type=Path,
        help="koordinator-qos rules (YAML), an alias of --policy koordinator-qos=FILE; polled "
        "for changes, see docs/koordinator.md",
    )
    p.add_argument(
        "--rules-poll-interval",
        metavar="SECONDS",
        type=float,
        default=POLL_INTERVAL_S,
        help="how often to check the rules file (and policies' other configuration sources)",
    )
    p.add_argument(
        "--check-rules",
        action="store_true",
        help="validate --rules, print the effective rules as JSON and exit",
    )
    p.add_argument(
        "--bridge-control",
        metavar="URL",
        help="the bridge's control API: unix:///path.sock (the server's uid checked: root, "
        "this process's, or --bridge-control-uid) or https://host:port (with "
        "--bridge-control-ca); rule changes are pushed to running containers through it and "
        "the reconciler reads its state; plain http:// only with --bridge-control-insecure",
    )
    p.add_argument(
        "--bridge-control-uid",
        metavar="UID",
        type=int,
        action="append",
        default=[],
        help="also trust a control socket served by this uid (repeatable; root and this "
        "process's uid always are)",
    )
    p.add_argument(
        "--bridge-control-ca",
        metavar="FILE",
        type=Path,
        help="CA certificate(s) the bridge's https certificate must chain to",
    )
    p.add_argument(
        "--bridge-control-cert",
        metavar="FILE",
        type=Path,
        help="client certificate for https (mutual TLS), with --bridge-control-key",
    )
    p.add_argument(
        "--bridge-control-key", metavar="FILE", type=Path, help="the client certificate's key"
    )
    p.add_argument(
        "--bridge-control-token-file",
        metavar="FILE",
        type=Path,
        help="send the token in this file as Authorization: Bearer to the control API",
    )
    p.add_argument(
        "--bridge-control-insecure",
        action="store_true",
        help="allow a plain http:// --bridge-control (no peer check, no TLS: any local user "
        "who binds the address feeds the reconciler); logged as a warning",
    )
    p.add_argument(
        "--bridge-start-wait",
        metavar="SECONDS",
        type=float,
        default=BRIDGE_START_WAIT_S,
        help="for this long after start-up, a bridge control socket that does not exist yet "
        "is the expected start-up order: logged once at INFO and retried every second; "
        f"after that, an error (default {BRIDGE_START_WAIT_S:g})",
    )
    p.add_argument(
        "--policy",
        metavar="NAME[=CONFIG]",
        action="append",
        default=[],
        help="serve the built-in policy NAME, configured from the YAML file CONFIG "
        f"(repeatable; see --list-policies and docs/policies/); {DEFAULT_POLICY} is served "
        "without it unless --no-koordinator",
    )
    p.add_argument(
        "--list-policies",
        action="store_true",
        help="print the built-in policies --policy can enable and exit",
    )
    p.add_argument(
        "--check-policies",
        action="store_true",
        help="build every --policy from its configuration, say which are fine and exit",
    )
    p.add_argument(
        "--policy-module",
        metavar="FILE_OR_MODULE",
        action="append",
        default=[],
        help="serve every Policy defined in this Python file or module (repeatable)",
    )
    p.add_argument(
        "--no-koordinator",
        action="store_true",
        help=f"do not serve {DEFAULT_POLICY} by default (an explicit --policy {DEFAULT_POLICY} "
        "or --rules FILE still does)",
    )
    effects = p.add_argument_group(
        "node effects (koordlet's pod-cgroup writes, resctrl groups, OOM scores, core "
        "scheduling, reconciler)"
    )
    effects.add_argument(
        "--pod-cgroup-writes",
        choices=[m.value for m in ExecutorMode],
        default=ExecutorMode.ON.value,
        help="on (default): apply them where this host allows (what cannot be done is said once "
        "at start-up and in GET /v1/state); dry-run: log only; off: report only",
    )
    effects.add_argument(
        "--reconcile-interval",
        metavar="SECONDS",
        type=float,
        default=DEFAULT_RECONCILE_INTERVAL_S,
        help="re-apply every decision this often, fixing drift (needs --bridge-control; "
        f"0 = only after rule changes; default {DEFAULT_RECONCILE_INTERVAL_S:g}, as koordlet)",
    )
    effects.add_argument(
        "--resctrl-root",
        type=Path,
        default=DEFAULT_RESCTRL_ROOT,
        help=f"resctrl filesystem root (default {DEFAULT_RESCTRL_ROOT})",
    )
    effects.add_argument(
        "--proc-root",
        type=Path,
        default=DEFAULT_PROC_ROOT,
        help=f"procfs root for OOM scores and kernel switches (default {DEFAULT_PROC_ROOT})",
    )
    effects.add_argument(
        "--sys-root",
        type=Path,
        default=DEFAULT_SYS_ROOT,
        help="sysfs root the node's online CPUs and NUMA nodes are read from: rules naming "
        f"others are refused (default {DEFAULT_SYS_ROOT})",
    )
    effects.add_argument(
        "--cgroup-root",
        type=Path,
        default=DEFAULT_CGROUP_ROOT,
        help=f"cgroup filesystem root (default {DEFAULT_CGROUP_ROOT})",
    )
    effects.add_argument(
        "--kubelet-cgroup-root",
        metavar="CGROUP",
        default=DEFAULT_KUBELET_CGROUP_ROOT,
        help="kubelet's --cgroup-root: every cgroup written or read lies beneath its kubepods "
        "(cgroupfs driver) or kubepods.slice (systemd driver) "
        f"(default {DEFAULT_KUBELET_CGROUP_ROOT})",
    )
    effects.add_argument(
        "--cgroup-version",
        choices=[v.value for v in CgroupVersion],
        default=CgroupVersion.AUTO.value,
        help="default: detect from the root",
    )
    effects.add_argument(
        "--cpu-weight-formula",
        choices=[v.value for v in WeightSetting],
        default=WeightSetting.AUTO.value,
        help="how the OCI runtime turns cpu shares into cgroup v2 cpu.weight: linear (runc < "
        "1.3.2, crun < 1.23), quadratic (runc >= 1.3.2, crun >= 1.23); default auto: learned "
        "from running containers",
    )
    effects.add_argument(
        "--systemd-properties",
        choices=[m.value for m in PropertiesMode],
        default=PropertiesMode.AUTO.value,
        help="with the systemd cgroup driver (cgroup v2), also set pod slice values as the "
        "slice units' properties over D-Bus, as kubelet does, so systemd keeps them; the "
        "files are written either way. auto (default): if systemd answers at start-up; on: "
        "always try (a failing bus is one warning); off: files only",
    )
    effects.add_argument(
        "--system-bus",
        metavar="ADDRESS",
        default=DEFAULT_SYSTEM_BUS,
        help=f"D-Bus address of the system bus (default {DEFAULT_SYSTEM_BUS})",
    )
    listen.add_argument(
        "--metrics-address",
        metavar="HOST:PORT",
        help="also serve GET /metrics (and nothing else) on this TCP address, e.g. "
        "0.0.0.0:9465 for Prometheus in a pod",
    )
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    p.add_argument(
        "--log-format",
        default="text",
        choices=LOG_FORMATS,
        help="text, or one JSON object per line (the bridge's --log-format json shape)",
    )
    return p


def options_from(args: argparse.Namespace) -> ServerOptions:
    return ServerOptions(
        rules_path=args.rules,
        bridge_control=args.bridge_control,
        bridge_trust=BridgeTrust(
            uids=frozenset(args.bridge_control_uid),
            ca=args.bridge_control_ca,
            cert=args.bridge_control_cert,
            key=args.bridge_control_key,
            token_file=args.bridge_control_token_file,
            insecure=args.bridge_control_insecure,
        ),
        kubelet_cgroup_root=args.kubelet_cgroup_root,
        policy_modules=tuple(args.policy_module),
        builtin_policies=tuple(parse_policy_arg(value) for value in args.policy),
        default_policies=not args.no_koordinator,
        executor_mode=ExecutorMode(args.pod_cgroup_writes),
        cgroup_root=args.cgroup_root,
        cgroup_version=CgroupVersion(args.cgroup_version),
        cpu_weight_formula=WeightSetting(args.cpu_weight_formula),
        systemd_properties=PropertiesMode(args.systemd_properties),
        system_bus=args.system_bus,
        rules_poll_interval_s=args.rules_poll_interval,
        reconcile_interval_s=args.reconcile_interval,
        bridge_start_wait_s=args.bridge_start_wait,
        resctrl_root=args.resctrl_root,
        proc_root=args.proc_root,
        sys_root=args.sys_root,
    )


def bind_unix_socket(path: Path, mode: int) -> socket.socket:
    """Bind a listening Unix socket created with ``mode`` (see bridge.transport.listen)."""
    try:
        return listen.unix_listener(str(path), mode, dir_mode=0o755)
    except listen.ListenError as exc:
        raise StartupError(str(exc)) from None


def bind_tcp_socket(host: str, port: int) -> socket.socket:
    try:
        return listen.tcp_listener(host, port)
    except listen.ListenError as exc:
        raise StartupError(str(exc)) from None


def parse_metrics_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (IPv6 hosts in brackets) for ``--metrics-address``."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise StartupError(f"--metrics-address: expected HOST:PORT, got {text!r}")
    return host, int(port)


def _bounds(args: argparse.Namespace) -> Bounds:
    if args.header_timeout <= 0:
        raise StartupError("--header-timeout must be > 0")
    if args.max_connections < 1:
        raise StartupError("--max-connections must be >= 1")
    return Bounds(
        max_body_bytes=OTHER_BODY_BYTES,
        body_bytes_by_path=(("/v1/policies/", POLICY_BODY_BYTES),),
        header_timeout_s=args.header_timeout,
        max_connections=args.max_connections,
    )


def _access(args: argparse.Namespace) -> Access:
    tls = None
    if args.tls_cert_file or args.tls_key_file or args.tls_client_ca_file:
        if not (args.tls_cert_file and args.tls_key_file):
            raise StartupError("--tls-cert-file and --tls-key-file go together")
        tls = TlsFiles(args.tls_cert_file, args.tls_key_file, args.tls_client_ca_file)
    return Access(
        tls=tls,
        bearer_token_file=args.bearer_token_file,
        insecure=args.insecure,
        allowed_uids=tuple(args.allow_uid) if args.allow_uid else None,
        allowed_gids=tuple(args.allow_gid) if args.allow_gid else None,
        allowed_hosts=tuple(args.allow_host),
    )


def _tcp_guard(args: argparse.Namespace, bounds: Bounds) -> tuple[GuardSettings, dict[str, Any]]:
    """The TCP listener's guard and TLS options; refuses an unauthenticated one."""
    access = _access(args)
    try:
        check_tcp_access(access, f"--host {args.host}")
        token = load_token(access.bearer_token_file) if access.bearer_token_file else None
        tls = uvicorn_tls(access.tls)
    except ListenerConfigError as exc:
        raise StartupError(str(exc)) from None
    names = allowed_names(args.host, access.allowed_hosts)
    return GuardSettings(bounds=bounds, token=token, check_host=True, allowed_hosts=names), tls


def _listen(args: argparse.Namespace) -> tuple[socket.socket, str, Path | None, Listener]:
    bounds = _bounds(args)
    if args.host is not None or args.port is not None:
        if args.uds is not None:
            raise StartupError("--uds and --host/--port are mutually exclusive")
        if args.host is None or args.port is None:
            raise StartupError("TCP needs both --host and --port")
        guard, tls = _tcp_guard(args, bounds)
        scheme = "https" if tls else "http"
        sock = bind_tcp_socket(args.host, args.port)
        return sock, f"{scheme}://{args.host}:{args.port}", None, Listener(guard, tls)
    path = Path(args.uds or DEFAULT_UDS)
    access = _access(args)
    problem = file_checks.socket_problem(path)
    if problem is not None:
        raise StartupError(problem)
    sock = bind_unix_socket(path, SOCKET_MODES[args.socket_mode])
    guard = GuardSettings(
        bounds=bounds,
        peer_rule=default_rule(str(path), access.allowed_uids, access.allowed_gids),
        allowed_hosts=allowed_names(None, (*access.allowed_hosts, path.name)),
    )
    return sock, f"unix://{path}", path, Listener(guard, {})


class _MainServer(uvicorn.Server):
    """The policy listener: takes the stop signals over from the latch
    (bridge.process_setup.stop_signals) while it serves; uvicorn puts the latch back afterwards
    and re-raises what it caught."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        stop_signals.checkpoint("loop")
        with super().capture_signals():
            # Handlers first, then the latch: a stop signal lands in one of the two.
            signum = stop_signals.stop_requested()
            if signum is not None:
                self.handle_exit(signum, None)
            stop_signals.checkpoint("handlers")
            yield
        stop_signals.checkpoint("handlers-restored")

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        stop_signals.checkpoint("started")

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        stop_signals.checkpoint("shutting-down")
        await super().shutdown(sockets)


async def serve(
    assembly: Assembly,
    listener: Listener,
    sock: socket.socket,
    metrics_sock: socket.socket | None = None,
) -> None:
    """Serve what ``assemble`` built on the bound sockets until a stop signal."""
    config = assembly.config(listener)
    config.load()  # imports and builds the app now, so that the freeze below covers it
    # The app, the policies and every module live as long as the process: out of the
    # collector's sight, a full collection no longer walks them (before, a pause of tens of
    # milliseconds every few thousand requests: docs/performance.md#numbers-behind-the-code).
    gc.collect()
    gc.freeze()
    main = _MainServer(config)
    if metrics_sock is None:
        await main.serve(sockets=[sock])
        return
    # The metrics listener: the main server owns the signals and stops it.
    metrics = PromptServer(assembly.metrics_config())
    metrics_task = asyncio.create_task(metrics.serve(sockets=[metrics_sock]), name="metrics")
    try:
        await main.serve(sockets=[sock])
    finally:
        metrics.request_exit()
        await metrics_task


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (``argv`` None: this process's own, whose stop signals stay caught
    until it exits; a list: an in-process caller, whose handlers come back afterwards)."""
    with stop_signals.held(process=argv is None):
        stop_signals.checkpoint("main")
        code = _main(build_parser().parse_args(argv))
        stop_signals.checkpoint("exiting")
        return code


def _main(args: argparse.Namespace) -> int:
    root = logging.getLogger()
    root.handlers[:] = [handler(args.log_format)]
    root.setLevel(args.log_level.upper())
    # A stop signal is only recorded (bridge.process_setup.stop_signals) until uvicorn takes it
    # over: start-up goes on to the next point where stopping is clean (below), so that nothing
    # is left half made, such as a socket file without the code that removes it.
    try:
        if args.check_rules:
            return _check_rules(args.rules, args.sys_root, args.proc_root)
        if args.list_policies:
            for name, description in describe_builtins().items():
                print(f"{name:20} {description}")
            return 0
        if args.check_policies:
            return _check_policies(args.policy)
        if _refused_files(_config_files(args)):
            return 2
        if args.reconcile_interval < 0:
            raise StartupError("--reconcile-interval must be >= 0")
        if args.bridge_start_wait < 0:
            raise StartupError("--bridge-start-wait must be >= 0")
        # Builds and configures every policy, and the app in front of them.
        assembly = assemble(options_from(args), log_level=args.log_level)
        server = assembly.server
        server.probe_node()
        metrics_address = (
            parse_metrics_address(args.metrics_address) if args.metrics_address else None
        )
        if stop_signals.stop_requested() is not None:
            return 0  # stopped during start-up: nothing is bound yet
        sock, where, uds_path, listener = _listen(args)
    except PolicyServerError as exc:
        print(f"nri-policy-server: {exc}", file=sys.stderr)
        return 2
    metrics_sock = None
    try:
        if metrics_address is not None:
            metrics_sock = bind_tcp_socket(*metrics_address)
            where += f", metrics on http://{args.metrics_address}/metrics"
        log.info("serving %s on %s", ", ".join(p.name for p in server.registry), where)
        stop_signals.checkpoint("bound")
        if stop_signals.stop_requested() is None:
            # uvloop: the event loop in C (libuv); uvicorn picks it only when it creates the
            # loop. A stop signal from here on is handed to uvicorn (_MainServer).
            uvloop.run(serve(assembly, listener, sock, metrics_sock))
        stop_signals.checkpoint("loop-closed")
    except StartupError as exc:
        print(f"nri-policy-server: {exc}", file=sys.stderr)
        return 2
    finally:
        sock.close()
        if metrics_sock is not None:
            metrics_sock.close()
        if uds_path is not None:
            with contextlib.suppress(OSError):
                uds_path.unlink()
    return 0


def _config_files(args: argparse.Namespace) -> list[tuple[str, Path]]:
    """Every file (or CEL directory) the server's policies are configured or loaded from."""
    files = [("--rules", args.rules)] if args.rules is not None else []
    for value in args.policy:
        _, config = parse_policy_arg(value)
        if config is not None:
            files.append(("--policy", config))
    return files + file_checks.module_files(args.policy_module)


def _refused_files(files: list[tuple[str, Path]]) -> bool:
    """Prints each file that fails the file rule (docs/security.md#files); True if any did."""
    problems = file_checks.config_problems(files)
    for problem in problems:
        print(f"nri-policy-server: {problem}", file=sys.stderr)
    return bool(problems)


def _check_policies(values: Sequence[str]) -> int:
    if not values:
        raise StartupError("--check-policies needs at least one --policy NAME[=CONFIG]")
    configs = [("--policy", c) for _, c in map(parse_policy_arg, values) if c is not None]
    if _refused_files(configs):
        return 2
    for value in values:
        name, config = parse_policy_arg(value)
        build_builtin(name, config)  # raises PolicyConfigError naming the file and key
        print(f"ok {name} ({config if config is not None else 'defaults'})")
    return 0


def _check_rules(path: Path | None, sys_root: Path, proc_root: Path) -> int:
    """``--check-rules``: build the policy ``--rules`` configures on the node ``--sys-root``
    and ``--proc-root`` describe (rules naming CPUs it lacks are refused) and print its
    rules."""
    if path is None:
        raise StartupError("--check-rules needs --rules FILE")
    if _refused_files([("--rules", path)]):
        return 2
    facts = NodeFacts(topology=read_topology(sys_root, proc_root))
    policy = build_builtin(DEFAULT_POLICY, path, facts)  # RulesError naming the file and key
    describe = policy.extensions.describe
    assert describe is not None  # the rules policy describes its rules
    print(json.dumps(describe()["rules"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
