"""Loading what a listener authenticates with: the bearer token and the TLS files.

One place for both products, so that the file checks (owner, mode, no symlinks) apply to every
listener at once. A missing, unreadable or empty file is an error naming the path.
"""

from __future__ import annotations

import ssl
from typing import Any

from bridge.listening.listener_config import ListenerConfigError, TlsFiles

MAX_TOKEN_BYTES = 4096


def load_token(path: str) -> bytes:
    """The token in `path`, surrounding whitespace stripped."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_TOKEN_BYTES + 1)
    except OSError as exc:
        raise ListenerConfigError(f"bearer token file {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_TOKEN_BYTES:
        raise ListenerConfigError(f"bearer token file {path}: longer than {MAX_TOKEN_BYTES} "
                                  "bytes")
    token = raw.strip()
    if not token:
        raise ListenerConfigError(f"bearer token file {path}: empty")
    return token


def uvicorn_tls(tls: TlsFiles | None) -> dict[str, Any]:
    """`uvicorn.Config` keyword arguments serving TLS with `tls` (nothing for None); each
    file is tried here first, so a bad one is an error naming it before anything listens."""
    if tls is None:
        return {}
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(tls.cert_file, tls.key_file)
    except (OSError, ssl.SSLError) as exc:
        raise ListenerConfigError(
            f"TLS cert_file {tls.cert_file} / key_file {tls.key_file}: {exc}") from None
    options: dict[str, Any] = {"ssl_certfile": tls.cert_file, "ssl_keyfile": tls.key_file}
    if tls.client_ca_file is not None:
        try:
            context.load_verify_locations(tls.client_ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise ListenerConfigError(
                f"TLS client_ca_file {tls.client_ca_file}: {exc}") from None
        options |= {"ssl_ca_certs": tls.client_ca_file, "ssl_cert_reqs": ssl.CERT_REQUIRED}
    return options
