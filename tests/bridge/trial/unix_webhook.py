"""A hand-made webhook for `try` tests: an http.server handler on a Unix socket, in a thread.

Owns: answering JSON (`JsonWebhook.reply` returns the body for a request) and serving a handler
on a socket for the length of a `with` block. Must not: know the bridge's contract beyond JSON.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class JsonWebhook(http.server.BaseHTTPRequestHandler):
    """Answers each POST with `reply(request)` as JSON; quiet."""

    protocol_version = "HTTP/1.1"

    def reply(self, request: Any) -> Any:
        raise NotImplementedError

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        body = json.dumps(self.reply(request)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


@contextlib.contextmanager
def serving(sock: Path, handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[Path]:
    """Serve `handler` on the Unix socket `sock` until the block ends."""
    server = _UnixServer(str(sock), handler)
    thread = threading.Thread(target=server.serve_forever, name=f"webhook:{sock.name}")
    thread.start()
    try:
        yield sock
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
