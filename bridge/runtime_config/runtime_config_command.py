"""`nri-webhook-bridge runtime-config`: print, or with `--write` apply, the change enabling NRI.

Owns: the command's flags, reading `--file` (a missing file is a new one), the header a new
file opens with, printing the result (stdout) and what changed (stderr), and `--write`:
nothing is written when nothing changes (idempotent: the file keeps its bytes and mtime), else
a temporary file beside it replaces it atomically with the same mode.

Must not: restart or signal the runtime (the operator does, the header says how), or write any
file but `--file`.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import tempfile
import textwrap
from pathlib import Path

from bridge.runtime_config import nri_settings as ns
from bridge.runtime_config import toml_change
from bridge.runtime_config.runtime_tables import CONTAINERD, RUNTIMES, RuntimeConfigError, target

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
_WHERE = {
    CONTAINERD: "Merge into /etc/containerd/config.toml or a file its `imports` lists (a newer "
                "containerd reads an older format: 2.x migrates version 2 and 3), restart "
                "containerd, check with `containerd config dump`.",
    "cri-o": "Save as a drop-in such as /etc/crio/crio.conf.d/10-nri.conf (or merge into "
             "crio.conf), then `systemctl restart crio`.",
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runtime", required=True, choices=RUNTIMES)
    p.add_argument("--runtime-version", required=True, metavar="VERSION",
                   help="the runtime's release, e.g. 1.7, 2.1.9 or 1.34 (`containerd --version`, "
                        "`crio --version`): it decides the config format and whether the "
                        "default validator exists")
    p.add_argument("--file", metavar="PATH",
                   help="the runtime's config file (or drop-in) to change; a missing file is "
                        "created by --write. Without it, the change alone is printed")
    p.add_argument("--write", action="store_true",
                   help="write the result to --file (nothing is written when nothing changes)")
    p.add_argument("--socket-path", default=ns.DEFAULT_SOCKET_PATH, metavar="PATH")
    p.add_argument("--plugin-path", default=ns.DEFAULT_PLUGIN_PATH, metavar="DIR")
    p.add_argument("--plugin-config-path", default=ns.DEFAULT_PLUGIN_CONFIG_PATH, metavar="DIR")
    p.add_argument("--registration-timeout", default=ns.DEFAULT_REGISTRATION_TIMEOUT,
                   metavar="DURATION", help="plugin_registration_timeout (Go duration)")
    p.add_argument("--request-timeout", default=ns.DEFAULT_REQUEST_TIMEOUT, metavar="DURATION",
                   help="plugin_request_timeout (Go duration)")
    p.add_argument("--fail-closed", action="store_true",
                   help="turn on the runtime's default validator (containerd >= 2.2, CRI-O >= "
                        "1.34): no container is created while a required plugin is missing; "
                        "OCI hook, namespace and seccomp adjustments are rejected")
    p.add_argument("--required-plugin", action="append", metavar="NAME",
                   help=f"with --fail-closed (repeatable; default {ns.DEFAULT_REQUIRED_PLUGIN})")
    p.add_argument("--tolerate-annotation", default=ns.DEFAULT_TOLERATE_ANNOTATION, metavar="KEY",
                   help="with --fail-closed: the annotation that lets a pod start without the "
                        "required plugins ('' for none)")
    p.add_argument("--allow-adjustment", action="append", default=[],
                   choices=tuple(ns.REJECTABLE), help="with --fail-closed: do not reject this "
                   "kind (repeatable), for a policy that makes it")


def _settings(args: argparse.Namespace) -> ns.NriSettings:
    fail_only = [flag for flag, given in (
        ("--required-plugin", args.required_plugin is not None),
        ("--allow-adjustment", bool(args.allow_adjustment)),
        ("--tolerate-annotation", args.tolerate_annotation != ns.DEFAULT_TOLERATE_ANNOTATION),
    ) if given]
    if fail_only and not args.fail_closed:
        raise RuntimeConfigError(f"{', '.join(fail_only)}: only with --fail-closed")
    fail_closed = None
    if args.fail_closed:
        fail_closed = ns.FailClosed(
            tuple(args.required_plugin or (ns.DEFAULT_REQUIRED_PLUGIN,)),
            args.tolerate_annotation, frozenset(args.allow_adjustment))
    return ns.NriSettings(args.socket_path, args.plugin_path, args.plugin_config_path,
                          args.registration_timeout, args.request_timeout, fail_closed)


def command_line(args: argparse.Namespace) -> str:
    """The command that makes this change, as a new file's header names it: the runtime, then
    the flags whose values are not the defaults (never --file or --write)."""
    shown = ["--runtime", args.runtime, "--runtime-version", args.runtime_version]
    for flag, default in (("--socket-path", ns.DEFAULT_SOCKET_PATH),
                          ("--plugin-path", ns.DEFAULT_PLUGIN_PATH),
                          ("--plugin-config-path", ns.DEFAULT_PLUGIN_CONFIG_PATH),
                          ("--registration-timeout", ns.DEFAULT_REGISTRATION_TIMEOUT),
                          ("--request-timeout", ns.DEFAULT_REQUEST_TIMEOUT)):
        value = getattr(args, flag[2:].replace("-", "_"))
        if value != default:
            shown += [flag, value]
    if args.fail_closed:
        shown.append("--fail-closed")
        for name in args.required_plugin or ():
            shown += ["--required-plugin", name]
        if args.tolerate_annotation != ns.DEFAULT_TOLERATE_ANNOTATION:
            shown += ["--tolerate-annotation", args.tolerate_annotation]
        for kind in args.allow_adjustment:
            shown += ["--allow-adjustment", kind]
    return shlex.join(["nri-webhook-bridge", "runtime-config", *shown])


def _write(path: Path, text: str) -> None:
    mode = path.stat().st_mode & 0o7777 if path.exists() else 0o644
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def requested_change(args: argparse.Namespace,
                     text: str | None = None) -> tuple[toml_change.Change, str]:
    """The change the parsed `args` ask for, and the name of the file it is for; `text` stands
    for the file's content (an in-process caller's), else `--file` is read."""
    source = args.file or "<new>"
    if text is None and args.file:
        path = Path(args.file)
        try:
            text = path.read_text(encoding="utf-8") if path.exists() else ""
        except (OSError, UnicodeDecodeError) as exc:
            raise RuntimeConfigError(f"{source}: cannot read: {exc}") from None
    text = text or ""
    data = toml_change.read(text, source)
    file_version = toml_change.config_version(data, source) if args.runtime == CONTAINERD else None
    tgt = target(args.runtime, args.runtime_version, file_version, source)
    settings = _settings(args)
    header = [f"NRI for {tgt.describe()}, written by", f"  {command_line(args)}",
              "", *_wrap(_WHERE[tgt.runtime]), "See docs/runtime-config.md."]
    return toml_change.set_entries(text, source, tgt, ns.entries(tgt, settings), header), source


def _wrap(text: str) -> list[str]:
    return textwrap.wrap(text, toml_change.WIDTH - 2)


def main(args: argparse.Namespace) -> int:
    try:
        if args.write and not args.file:
            raise RuntimeConfigError("--write: needs --file")
        result, source = requested_change(args)
    except RuntimeConfigError as exc:
        print(f"runtime-config: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for warning in result.warnings:
        print(f"runtime-config: warning: {warning}", file=sys.stderr)
    if not args.write:
        sys.stdout.write(result.text)
        return EXIT_OK
    if not result.changed:
        print(f"{source}: unchanged", file=sys.stderr)
        return EXIT_OK
    try:
        _write(Path(args.file), result.text)
    except OSError as exc:
        print(f"runtime-config: {source}: cannot write: {exc}", file=sys.stderr)
        return EXIT_FAILED
    for line in result.changed:
        print(f"{source}: {line}", file=sys.stderr)
    print(f"{source}: written; restart the runtime to apply it", file=sys.stderr)
    return EXIT_OK
