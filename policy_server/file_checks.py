"""The policy server's files and socket path held to the node's file rule at start-up.

A root policy server acts on what its files say: a rules file, a ``--policy NAME=CONFIG`` file
or CEL directory or a ``--policy-module`` file another user can change is that user's root.
Owns listing which of them (and the ``--uds`` socket's directory, and whatever is at its path
already) fail the rule of ``bridge.file_trust`` (docs/security.md#files), each problem
naming its path; ``main`` refuses to start (exit 2) on any, ``--check-rules`` and
``--check-policies`` report them. Must not read what the files hold.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from bridge import file_trust


def _message(flag: str, path: Path, exc: file_trust.UntrustedPath) -> str:
    where = str(exc) if exc.path == str(path) else f"{path}: {exc}"
    return f"{flag} {where}"


def config_problems(files: Iterable[tuple[str, Path]]) -> list[str]:
    """``(flag, path)`` of each configuration source: a file, or a directory (CEL) whose
    files are checked too. One line per problem: ``--rules /etc/x.yaml: owned by uid 1001``."""
    problems = []
    for flag, path in files:
        if not path.exists():
            continue  # not a trust problem: the loader says it cannot read it
        try:
            if path.is_dir():
                file_trust.check_directory(str(path))
                for entry in sorted(path.iterdir()):
                    if entry.suffix in (".yaml", ".yml") and entry.is_file():  # what CEL reads
                        file_trust.check_file(str(entry))
            else:
                file_trust.check_file(str(path))
        except file_trust.UntrustedPath as exc:
            problems.append(_message(flag, path, exc))
    return problems


def module_files(specs: Iterable[str]) -> list[tuple[str, Path]]:
    """The ``--policy-module`` values that name files (a dotted module name is imported from
    the installed packages, not a file the operator points at)."""
    return [("--policy-module", Path(s)) for s in specs if s.endswith(".py") or "/" in s]


def socket_problem(path: Path) -> str | None:
    """What is wrong with listening at ``path``: its directory (taken if it is ours and others
    may write it: a Kubernetes emptyDir) or another user's file already there; None if fine."""
    try:
        file_trust.check_socket_path(str(path), take_directory=True)
    except file_trust.UntrustedPath as exc:
        return _message("--uds", path, exc) + "; refusing to listen there"
    return None
