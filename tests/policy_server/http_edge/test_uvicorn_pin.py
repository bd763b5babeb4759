"""What policy_server/http_edge/http_protocol.py (and main.py) lean on inside uvicorn, checked
by name, so that a uvicorn release that moves it fails here, loudly, before it fails subtly
(a reply in two writes, or none) in production.

pyproject.toml bounds uvicorn to the range these checks were run against; raise the bound
only after running them on the new release.
"""

from __future__ import annotations

import asyncio
import inspect
import tomllib
from importlib.metadata import version
from pathlib import Path
from typing import Any

import uvicorn
from packaging.requirements import Requirement
from uvicorn.protocols.http import httptools_impl
from uvicorn.server import ServerState

from policy_server.http_edge.http_protocol import CoalescingHttpToolsProtocol, _HeldWrites

ROOT = Path(__file__).resolve().parents[3]
CHANGED = ("uvicorn's internals changed: policy_server/http_edge/http_protocol.py relies on "
           "this; re-check it against uvicorn {v} before moving the bound in pyproject.toml. ")


def _changed(what: str) -> str:
    return CHANGED.format(v=version("uvicorn")) + what


def test_installed_uvicorn_is_inside_the_pinned_range() -> None:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pin = next(Requirement(d) for d in deps if Requirement(d).name == "uvicorn")
    assert pin.specifier.filter([version("uvicorn")]), (
        f"uvicorn {version('uvicorn')} is outside {pin.specifier}")
    assert any(s.operator == "<" for s in pin.specifier), "uvicorn must have an upper bound"


def test_the_internal_class_and_its_hooks_exist() -> None:
    assert inspect.isclass(getattr(httptools_impl, "HttpToolsProtocol", None)), _changed(
        "uvicorn.protocols.http.httptools_impl.HttpToolsProtocol is gone")
    cls = httptools_impl.HttpToolsProtocol
    params = list(inspect.signature(cls.connection_made).parameters)
    assert params == ["self", "transport"], _changed(f"connection_made{params}")
    params = list(inspect.signature(cls.__init__).parameters)[:4]
    assert params == ["self", "config", "server_state", "app_state"], _changed(
        f"HttpToolsProtocol.__init__{params}")
    assert callable(getattr(uvicorn.Server, "capture_signals", None)), _changed(
        "uvicorn.Server.capture_signals (policy_server/main.py overrides it) is gone")


class _Transport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.wrote = asyncio.Event()

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))
        self.wrote.set()

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str) -> Any:
        return None

    def close(self) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    await receive()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"{}"})


async def test_uvicorn_writes_the_reply_through_the_transport_it_was_handed() -> None:
    config = uvicorn.Config(app, http=CoalescingHttpToolsProtocol, lifespan="off",
                            log_config=None, access_log=False, date_header=False,
                            server_header=False)
    config.load()
    protocol = CoalescingHttpToolsProtocol(config=config, server_state=ServerState(),
                                           app_state={})
    real = _Transport()
    protocol.connection_made(real)  # type: ignore[arg-type]
    assert isinstance(protocol.transport, _HeldWrites), _changed(
        "HttpToolsProtocol.connection_made no longer keeps the transport as self.transport")
    protocol.data_received(b"POST / HTTP/1.1\r\nhost: p\r\ncontent-length: 0\r\n\r\n")
    await asyncio.wait_for(real.wrote.wait(), 30)  # a ceiling: only catches a hang
    assert len(real.writes) == 1 and real.writes[0].endswith(b"\r\n\r\n{}"), _changed(
        f"the reply went out as {real.writes!r}, not as one write through our transport")
    protocol.connection_lost(None)
