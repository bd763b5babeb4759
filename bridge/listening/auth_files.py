"""Loading what a listener authenticates with: the bearer token and the TLS files.

One place for both products, so that the file rule (owner, mode, no symlink another user
planted: `bridge.file_trust`, docs/security.md#files) applies to every listener at once.
Each file is read once, through that rule, and only those checked bytes are used: the TLS
files reach uvicorn's OpenSSL as anonymous memory files (memfd, held open for the life of the
process), never by their configured paths. A missing, unreadable, untrusted or empty file is
an error naming the path.
"""

from __future__ import annotations

import os
import ssl
from typing import Any

from bridge import file_trust
from bridge.listening.listener_config import ListenerConfigError, TlsFiles

MAX_TOKEN_BYTES = 4096
# The memory files uvicorn reads its TLS files from; open until the process exits, because
# uvicorn loads them when its server starts, after this module has handed over the paths.
_HELD: list[int] = []


def _read(path: str, what: str, limit: int = file_trust.MAX_FILE_BYTES) -> bytes:
    try:
        return file_trust.read_trusted(path, limit=limit)
    except file_trust.UntrustedPath as exc:
        raise ListenerConfigError(f"{what} {exc}") from None


def load_token(path: str) -> bytes:
    """The token in `path`, surrounding whitespace stripped."""
    raw = _read(path, "bearer token file", limit=MAX_TOKEN_BYTES + 1)
    if len(raw) > MAX_TOKEN_BYTES:
        raise ListenerConfigError(f"bearer token file {path}: longer than {MAX_TOKEN_BYTES} "
                                  "bytes")
    token = raw.strip()
    if not token:
        raise ListenerConfigError(f"bearer token file {path}: empty")
    return token


def _memory_file(name: str, data: bytes) -> str:
    fd = os.memfd_create(f"nri-listener-{name}", os.MFD_CLOEXEC)
    os.write(fd, data)
    _HELD.append(fd)
    return f"/proc/self/fd/{fd}"


def uvicorn_tls(tls: TlsFiles | None) -> dict[str, Any]:
    """`uvicorn.Config` keyword arguments serving TLS with `tls` (nothing for None); each
    file is checked and tried here first, so a bad one is an error naming it before anything
    listens."""
    if tls is None:
        return {}
    cert = _memory_file("cert", _read(tls.cert_file, "TLS cert_file"))
    key = _memory_file("key", _read(tls.key_file, "TLS key_file"))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise ListenerConfigError(
            f"TLS cert_file {tls.cert_file} / key_file {tls.key_file}: {exc}") from None
    options: dict[str, Any] = {"ssl_certfile": cert, "ssl_keyfile": key}
    if tls.client_ca_file is not None:
        ca = _memory_file("client-ca", _read(tls.client_ca_file, "TLS client_ca_file"))
        try:
            context.load_verify_locations(ca)
        except (OSError, ssl.SSLError) as exc:
            raise ListenerConfigError(
                f"TLS client_ca_file {tls.client_ca_file}: {exc}") from None
        options |= {"ssl_ca_certs": ca, "ssl_cert_reqs": ssl.CERT_REQUIRED}
    return options
