"""The servers of the conformance matrix: how to start each, and what it offers.

Every kind serves the same small policy (the SDK example where the server is Python, the
same few lines in Node and Go) with the routes /v1/policy, /chunked and /close; /interim
(1xx before the reply) where the server can send one. `argv` gets the inherited listening
descriptor, the idle timeout to set (None: the server's default) and whether to keep no
connection alive at all.

nginx is a front: it proxies (HTTP/1.1, upstream keep-alive) to the Python policy on a Unix
socket of its own, and listens on addresses it binds itself (nginx_front.py).

Owns: the table of kinds. Must not: drive events (harness.py).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

HERE = Path(__file__).resolve().parent

Argv = Callable[[int, float | None, bool], list[str]]


@dataclass(frozen=True)
class Kind:
    name: str
    default_idle_s: float | None  # the server's own keep-alive idle timeout; None: never
    short_idle_s: float  # the shortest it is run with (gunicorn: whole seconds)
    interim: bool = False  # can send 1xx before a reply
    argv: Argv | None = None  # None: nginx (nginx_front.py starts it)

    def __str__(self) -> str:
        return self.name


def _python(name: str) -> Argv:
    def argv(fd: int, idle: float | None, close_always: bool) -> list[str]:
        out = [sys.executable, "-m", "tests.servers.python_policy", name, "--fd", str(fd)]
        if idle is not None:
            out += ["--idle", str(idle)]
        return out + (["--close-always"] if close_always else [])
    return argv


def _node(fd: int, idle: float | None, close_always: bool) -> list[str]:
    out = ["node", str(HERE / "node_policy.js"), "--fd", str(fd)]
    if idle is not None:
        out += ["--idle", str(idle)]
    return out + (["--close-always"] if close_always else [])


@cache
def built(script: str) -> str:
    """The path a build/fetch script prints (it exits non-zero with the reason otherwise)."""
    done = subprocess.run(["bash", str(HERE / script)], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{script} failed:\n{done.stderr[-2000:]}")
    return done.stdout.strip().splitlines()[-1]


def _go(fd: int, idle: float | None, close_always: bool) -> list[str]:
    out = [built("gopolicy/build.sh"), "-fd", str(fd)]
    if idle is not None:
        out += ["-idle", str(idle)]
    return out + (["-close-always"] if close_always else [])


SHORT = 0.05
KINDS = (
    Kind("uvicorn-httptools", 5.0, SHORT, argv=_python("uvicorn-httptools")),
    Kind("uvicorn-h11", 5.0, SHORT, argv=_python("uvicorn-h11")),
    Kind("hypercorn", 5.0, SHORT, argv=_python("hypercorn")),
    Kind("gunicorn-uvicorn", 2.0, 1.0, argv=_python("gunicorn-uvicorn")),
    Kind("gunicorn-gthread", 2.0, 1.0, argv=_python("gunicorn-gthread")),
    Kind("aiohttp", 75.0, SHORT, argv=_python("aiohttp")),
    Kind("node", 5.0, SHORT, interim=True, argv=_node),
    Kind("go", None, SHORT, interim=True, argv=_go),
    Kind("nginx", 75.0, SHORT),
)
