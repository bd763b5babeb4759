"""A webhook that answers from a script: a reply per (event, container name), served over HTTP
on a Unix socket from a thread of the test process.

Owns: the socket, the thread, the script (event -> container name -> JSON reply; `{}` for
anything unscripted) and the request bodies it received (a test predicts from the container
the runtime really sent). Must not: decide anything; the test writes the script.
"""

from __future__ import annotations

import json
import socketserver
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

Body = dict[str, Any]
Reply = Callable[[Body], Body]


class ScriptedWebhook:
    """`replies[(event, container name)](request body) -> reply body`."""

    def __init__(self, socket_path: Path) -> None:
        self.socket_path = socket_path
        self.replies: dict[tuple[str, str], Reply] = {}
        self.received: list[Body] = []
        self._lock = threading.Lock()
        self._server: socketserver.ThreadingUnixStreamServer | None = None
        self._thread: threading.Thread | None = None

    def url(self) -> str:
        return f"unix://{self.socket_path}/v1/scripted"

    def requests(self, event: str, name: str) -> list[Body]:
        with self._lock:
            return [b for b in self.received if b.get("event") == event
                    and (b.get("container") or {}).get("name") == name]

    def _answer(self, body: Body) -> Body:
        with self._lock:
            self.received.append(body)
        name = (body.get("container") or {}).get("name", "")
        reply = self.replies.get((str(body.get("event")), name))
        return reply(body) if reply is not None else {}

    def start(self) -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                data = json.dumps(owner._answer(json.loads(self.rfile.read(length)))).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return None  # no client address on a Unix socket

        server = socketserver.ThreadingUnixStreamServer(str(self.socket_path), Handler)
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="scripted-webhook",
                                        kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
