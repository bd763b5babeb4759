"""`nri-webhook-bridge` command line.

Exit codes: 0 success; 1 runtime failure (e.g. the simulator saw errors);
2 usage or configuration error.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence

import uvloop

from bridge import __version__, logs
from bridge.config_file import BridgeConfig, file_problems, load_file, load_text, parse
from bridge.control.settings import DEFAULT_SOCKET as DEFAULT_CONTROL_SOCKET
from bridge.control.settings import parse_address, parse_listen_address
from bridge.errors import ConfigError
from bridge.listening.listener_config import Access, TlsFiles
from bridge.process_setup import stop_signals
from bridge.record.recorder import Redaction
from bridge.transport import connect

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2

SUBCOMMANDS = ("run", "simulate", "validate-config", "record", "replay", "try", "test",
               "runtime-config")


def _add_run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nri-socket", default=connect.DEFAULT_SOCKET_PATH, metavar="PATH",
                   help="runtime NRI socket to connect to (default %(default)s); ignored when "
                        "launched by the runtime with NRI_PLUGIN_SOCKET")
    p.add_argument("--plugin-name", metavar="NAME",
                   help="plugin name sent in RegisterPlugin (default: $NRI_PLUGIN_NAME, the "
                        "program name if it looks like NN-name, else webhook-bridge)")
    p.add_argument("--plugin-index", metavar="NN",
                   help="two-digit plugin index, decides the order among plugins "
                        "(default: $NRI_PLUGIN_IDX or 50)")
    p.add_argument("--config", metavar="FILE", help="bridge configuration YAML")
    p.add_argument("--policy-url", metavar="URL",
                   help="one webhook with every default, named `policy` (unix:///path.sock/"
                        "http/path or http(s)://host:port/path); replaces the config's webhooks")
    p.add_argument("--control-socket", metavar="PATH",
                   help=f"control API Unix socket (default: the config's control.socket, else "
                        f"{DEFAULT_CONTROL_SOCKET}); an empty string disables it")
    p.add_argument("--control-address", metavar="HOST:PORT",
                   help="also serve the control API on this loopback TCP address; needs "
                        "--control-bearer-token-file or mutual TLS (--control-tls-*), or "
                        "--insecure")
    p.add_argument("--control-bearer-token-file", metavar="FILE",
                   help="TCP control clients must send Authorization: Bearer <file content> "
                        "(control.bearer_token_file)")
    p.add_argument("--control-tls-cert-file", metavar="FILE",
                   help="serve the TCP control address over TLS with this certificate "
                        "(control.tls.cert_file; with --control-tls-key-file)")
    p.add_argument("--control-tls-key-file", metavar="FILE", help="its key (control.tls.key_file)")
    p.add_argument("--control-tls-client-ca-file", metavar="FILE",
                   help="TCP control clients must present a certificate this CA signed "
                        "(control.tls.client_ca_file): mutual TLS")
    p.add_argument("--insecure", action="store_true",
                   help="allow --control-address without authentication (control.insecure): "
                        "every local user can then read and change containers; logged loudly")
    p.add_argument("--metrics-address", metavar="HOST:PORT",
                   help="also serve GET /metrics (and nothing else) on this TCP address, any "
                        "interface, e.g. 0.0.0.0:9464 for Prometheus in a pod")
    p.add_argument("--cri-socket", metavar="PATH",
                   help="the runtime's CRI socket, for container updates on runtimes where NRI "
                        "UpdateContainers can deadlock (default: the config's "
                        "updates.cri_socket, else the runtime's own: "
                        "/run/containerd/containerd.sock, /var/run/crio/crio.sock)")
    p.add_argument("--update-route", choices=("auto", "cri", "nri"),
                   help="how container updates reach the runtime: auto (CRI where NRI "
                        "UpdateContainers can deadlock, else NRI; the default), cri, nri")
    p.add_argument("--log-level", default="info",
                   choices=("debug", "info", "warning", "error"))
    p.add_argument("--log-format", default="text", choices=("text", "json"))
    p.add_argument("--log-file", metavar="PATH",
                   help="log to this file instead of stderr (launched plugins have no stderr)")


def build_bridge_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The full parser; given the `command` about to run, the other subcommands'
    own arguments are left out, so `run` never imports the simulator or the
    replay tooling (about 2 MB of RSS for a long-running plugin)."""
    parser = argparse.ArgumentParser(
        prog="nri-webhook-bridge",
        description="An NRI plugin that turns container lifecycle events into HTTP policy calls.",
        epilog="Exit codes: 0 ok, 1 runtime failure, 2 usage or configuration error. "
               "Without a subcommand, `run` is assumed.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    run = sub.add_parser("run", help="connect to the runtime and serve events (default)")
    _add_run_arguments(run)
    simulate = sub.add_parser("simulate", help="play the runtime side of NRI for a plugin "
                                               "(scenario and benchmark modes)")
    if command in (None, "simulate"):
        from bridge.simulator import commands as simulator_cli
        simulator_cli.add_arguments(simulate)
    record = sub.add_parser(
        "record", help="serve as `run` does and append every event and the reply sent to "
                       "the runtime to a JSONL file (fixtures for `replay`)")
    _add_run_arguments(record)
    record.add_argument("--output", required=True, metavar="FILE",
                        help="JSONL file to append to")
    record.add_argument("--redact-annotations", action="store_true",
                        help="replace pod and container annotation values with <redacted>")
    record.add_argument("--redact-env", action="store_true",
                        help="replace container environment values with <redacted>")
    replay = sub.add_parser(
        "replay", help="POST recorded events to a policy and diff its replies against the "
                       "recorded (or --expected) ones; exit 1 on any difference")
    if command in (None, "replay"):
        from bridge.record import replay_cli
        replay_cli.add_arguments(replay)
    trial = sub.add_parser(
        "try", help="play Kubernetes manifests through the bridge and a simulated runtime; "
                    "print what each webhook changed, rejected or warned, per container "
                    "(exit 1 on a reject, 2 on bad input)")
    if command in (None, "try"):
        from bridge.trial import try_command as try_cli
        try_cli.add_arguments(trial)
    suite = sub.add_parser(
        "test", help="run declarative policy test suites (YAML) through `try`'s engine; one "
                     "line per case, exit 1 when a case fails, 2 on a bad suite")
    if command in (None, "test"):
        from bridge.suite import suite_command as suite_cli
        suite_cli.add_arguments(suite)
    validate = sub.add_parser("validate-config", help="check a bridge configuration file")
    validate.add_argument("file", metavar="FILE")
    runtime_config = sub.add_parser(
        "runtime-config", help="print, or with --write apply, the runtime configuration change "
                               "that enables NRI (containerd 1.7/2.x, CRI-O); exit 2 on a file "
                               "it cannot parse")
    if command in (None, "runtime-config"):
        from bridge.runtime_config import runtime_config_command
        runtime_config_command.add_arguments(runtime_config)
    return parser


def _identity_defaults(args: argparse.Namespace) -> tuple[str, str]:
    prog = os.path.basename(sys.argv[0] or "")
    prog_index, _, prog_name = prog.partition("-")
    from_prog = len(prog_index) == 2 and prog_index.isdigit() and bool(prog_name)
    name = (args.plugin_name or os.environ.get(connect.ENV_NAME)
            or (prog_name if from_prog else "webhook-bridge"))
    index = (args.plugin_index or os.environ.get(connect.ENV_INDEX)
             or (prog_index if from_prog else "50"))
    return name, index


def _apply_flags(config: BridgeConfig, args: argparse.Namespace) -> BridgeConfig:
    """Command-line overrides on top of the file: --policy-url, --cri-socket, --update-route,
    --control-*, --metrics-*."""
    from dataclasses import replace

    from bridge.webhooks.specs import webhook_from_url

    if args.policy_url:
        config = replace(config, webhooks=(webhook_from_url(args.policy_url),))
    updates = config.updates
    if getattr(args, "cri_socket", None):
        if not args.cri_socket.startswith("/"):
            raise ConfigError("--cri-socket", "must be an absolute path")
        updates = replace(updates, cri_socket=args.cri_socket)
    if getattr(args, "update_route", None):
        updates = replace(updates, route=args.update_route)
    config = replace(config, updates=updates)
    control = config.control
    if args.control_socket is not None:
        path = args.control_socket or None
        if path is not None and not path.startswith("/"):
            raise ConfigError("--control-socket", "must be an absolute path")
        control = replace(control, socket_path=path, explicit_socket=path is not None)
    if args.control_address:
        control = replace(control, address=parse_address(args.control_address,
                                                         "--control-address"))
    if args.metrics_address:
        control = replace(control, metrics_address=parse_listen_address(args.metrics_address,
                                                                        "--metrics-address"))
    return replace(config, control=replace(control, access=_access_flags(control.access, args)))


def _access_flags(access: Access, args: argparse.Namespace) -> Access:
    """--control-bearer-token-file, --control-tls-*, --insecure over `control:`."""
    from dataclasses import replace

    def path(flag: str) -> str | None:
        value: str | None = getattr(args, flag.removeprefix("--").replace("-", "_"), None)
        if value is not None and not value.startswith("/"):
            raise ConfigError(flag, "must be an absolute path")
        return value

    token = path("--control-bearer-token-file")
    cert, key = path("--control-tls-cert-file"), path("--control-tls-key-file")
    client_ca = path("--control-tls-client-ca-file")
    if token is not None:
        access = replace(access, bearer_token_file=token)
    if cert is not None or key is not None or client_ca is not None:
        tls = access.tls
        cert = cert or (tls.cert_file if tls else None)
        key = key or (tls.key_file if tls else None)
        if cert is None or key is None:
            raise ConfigError("--control-tls-cert-file",
                              "needs --control-tls-key-file too (both or neither)")
        access = replace(access, tls=TlsFiles(cert, key, client_ca or (
            tls.client_ca_file if tls else None)))
    if getattr(args, "insecure", False):
        access = replace(access, insecure=True)
    return access


def _run(args: argparse.Namespace) -> int:
    from bridge import app
    from bridge.nri.session import PluginIdentity

    logs.setup(args.log_level, args.log_format, path=args.log_file)
    try:
        # The file is read only if it passes the file rule (and so must the files it names).
        config: BridgeConfig = load_file(args.config) if args.config else parse({})
        config = _apply_flags(config, args)
        name, index = _identity_defaults(args)
        identity = PluginIdentity(name=name, index=index)
        fd = connect.inherited_fd()
    except ConfigError as exc:
        print(f"nri-webhook-bridge: configuration error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    # Files and socket paths another user could change are refused, each named
    # (docs/security.md#files).
    problems = file_problems(config, None, take_directories=True)
    for problem in problems:
        print(f"nri-webhook-bridge: configuration error: {problem}", file=sys.stderr)
    if problems:
        return EXIT_USAGE
    record = None
    if getattr(args, "output", None):
        record = app.RecordOptions(args.output, Redaction(annotations=args.redact_annotations,
                                                          env=args.redact_env))
    options = app.RunOptions(identity=identity, socket_path=args.nri_socket, fd=fd, config=config,
                             record=record, config_from_file=bool(args.config))
    stop_signals.checkpoint("configured")
    if stop_signals.stop_requested() is not None:
        return EXIT_OK  # stopped during start-up: nothing is open yet
    # uvloop: the event loop in C (libuv); less bridge CPU per webhook event
    # (docs/performance.md#numbers-behind-the-code). The simulator and tools keep the stdlib
    # loop. A stop signal from here on stops app.run (bridge.process_setup.stop_signals.waking).
    code = uvloop.run(app.run_bridge(options))
    stop_signals.checkpoint("loop-closed")
    return code


def _validate(args: argparse.Namespace) -> int:
    """The config's keys and values, then every file and socket path it names (and the file
    itself) against the file rule: one line per problem, each naming its path."""
    try:
        config = load_file(args.file, check_files=False)
    except ConfigError as exc:
        print(f"{args.file}: invalid: {exc}", file=sys.stderr)
        return EXIT_USAGE
    problems = file_problems(config, args.file)
    for problem in problems:
        print(f"{args.file}: invalid: {problem}", file=sys.stderr)
    if problems:
        return EXIT_USAGE
    print(f"{args.file}: ok")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (``argv`` None: this process's own; a list: an in-process caller).

    ``run`` and ``record`` serve: their stop signals stay caught
    (bridge.process_setup.stop_signals) until the process exits, or, in-process, until main
    returns. The other commands get the handlers from before the entry point caught them
    (Ctrl-C stops them as usual)."""
    args, parser = _parse(list(sys.argv[1:] if argv is None else argv))
    if args.command in ("run", "record"):
        with stop_signals.held(process=argv is None):
            code = _run(args)
            stop_signals.checkpoint("exiting")
            return code
    stop_signals.release()
    return _one_shot(args, parser)


def _parse(argv: list[str]) -> tuple[argparse.Namespace, argparse.ArgumentParser]:
    if not argv or (argv[0] not in SUBCOMMANDS and argv[0] not in ("-h", "--help", "--version")):
        argv.insert(0, "run")  # `run` is the default subcommand
    if argv[0] == "try":
        from bridge.trial import try_command as try_cli
        argv = try_cli.attach_values(argv)
    parser = build_bridge_parser(argv[0] if argv[0] in SUBCOMMANDS else None)
    return parser.parse_args(argv), parser


def _one_shot(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.command == "replay":
        from bridge.record import replay_cli
        logs.setup("warning", "text")
        return replay_cli.main(args)
    if args.command == "validate-config":
        return _validate(args)
    if args.command == "runtime-config":
        from bridge.runtime_config import runtime_config_command
        return runtime_config_command.main(args)
    if args.command == "try":
        from bridge.trial import try_command as try_cli
        logs.setup("warning", "text")
        return try_cli.main(args)
    if args.command == "test":
        from bridge.suite import suite_command as suite_cli
        logs.setup("warning", "text")
        return suite_cli.main(args)
    if args.command == "simulate":
        from bridge.simulator import commands as simulator_cli
        logs.setup(getattr(args, "log_level", "warning") or "warning", "text")
        return asyncio.run(simulator_cli.main(args))
    parser.print_usage(sys.stderr)
    return EXIT_USAGE


__all__ = ["load_text", "main"]
