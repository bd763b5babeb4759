"""nginx in front of the Python policy: the configuration and the process.

nginx (Debian's binary, nginx/fetch.sh) listens on a Unix socket and on a TCP port and
proxies over HTTP/1.1 with upstream keep-alive to the policy (python_policy.py, uvicorn)
on a Unix socket, all under the test's temp dir. `keepalive_timeout` is the idle timeout
towards the bridge (nginx's default 75 s); 0 closes after every reply.

Owns: nginx's config and start. Must not: drive events.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from tests.servers.harness import listener, running
from tests.servers.kinds import built

CONF = """\
daemon off;
master_process off;
error_log {tmp}/nginx-error.log warn;
pid {tmp}/nginx.pid;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    {keepalive}
    upstream policy {{
        server unix:{backend};
        keepalive 16;
    }}
    server {{
        listen unix:{front};
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://policy;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }}
    }}
}}
"""


def _free_port() -> int:
    # nginx binds its own addresses; the port is free when chosen (nothing else on this
    # machine picks ports in the ephemeral range on purpose).
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def nginx(tmp: Path, idle: float | None, close_always: bool,
          ) -> Iterator[tuple[subprocess.Popen[bytes], dict[str, str]]]:
    """nginx (listening once tmp/nginx.pid exists) and its backend running; the process and
    {"unix": base URL, "tcp": base URL}."""
    binary = built("nginx/fetch.sh")
    backend_dir = tmp / "backend"
    backend_dir.mkdir()
    back = listener("unix", backend_dir)
    port = _free_port()
    front = tmp / "front.sock"
    if close_always:
        keepalive = "keepalive_timeout 0;"
    elif idle is not None:
        keepalive = f"keepalive_timeout {round(idle * 1000)}ms;"
    else:
        keepalive = ""
    conf = tmp / "nginx.conf"
    conf.write_text(CONF.format(tmp=tmp, keepalive=keepalive, port=port, front=front,
                                backend=back.base_url.removeprefix("unix://")))
    with ExitStack() as stack:
        stack.enter_context(running(
            [sys.executable, "-m", "tests.servers.python_policy", "uvicorn-httptools",
             "--fd", str(back.sock.fileno())], back.sock, tmp / "backend.log"))
        back.sock.close()
        proc = stack.enter_context(running([binary, "-p", str(tmp), "-c", str(conf)], None,
                                           tmp / "nginx.log"))
        yield proc, {"unix": f"unix://{front}", "tcp": f"http://127.0.0.1:{port}"}
