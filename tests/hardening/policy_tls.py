"""Throw-away certificates for the TLS tests, made with the `openssl` command line.

`make_pki(dir)` writes a CA, a server certificate for 127.0.0.1 and a client
certificate signed by it, a second unrelated CA (the "wrong CA"), and a
self-signed server certificate. EC P-256 keys, valid for one day; a whole set
takes well under a second. (The `cryptography` package is not a dependency.)
"""

from __future__ import annotations

import contextlib
import shutil
import ssl
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

OPENSSL = shutil.which("openssl")
_KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
_LEAF_EXT = ("basicConstraints=critical,CA:FALSE\nsubjectKeyIdentifier=hash\n"
             "authorityKeyIdentifier=keyid,issuer\n")


@dataclass(frozen=True, slots=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path
    self_signed_cert: Path
    self_signed_key: Path


def _openssl(*args: str | Path) -> None:
    assert OPENSSL is not None
    subprocess.run([OPENSSL, *map(str, args)], check=True, capture_output=True, timeout=30)


def _ca(directory: Path, name: str) -> tuple[Path, Path]:
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    _openssl("req", "-x509", *_KEY, "-keyout", key, "-out", cert, "-days", "1",
             "-subj", f"/CN={name}")
    return cert, key


def _leaf(directory: Path, name: str, ca: tuple[Path, Path], usage: str) -> tuple[Path, Path]:
    cert, key, csr = (directory / f"{name}.pem", directory / f"{name}.key",
                      directory / f"{name}.csr")
    ext = directory / f"{name}.ext"
    ext.write_text(_LEAF_EXT + f"extendedKeyUsage={usage}\nsubjectAltName=IP:127.0.0.1\n")
    _openssl("req", "-new", *_KEY, "-keyout", key, "-out", csr, "-subj", f"/CN={name}")
    _openssl("x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1], "-set_serial", "2",
             "-out", cert, "-days", "1", "-extfile", ext)
    return cert, key


def make_pki(directory: Path) -> Pki:
    if OPENSSL is None:
        pytest.skip("the TLS tests need the openssl command")
    directory.mkdir(parents=True, exist_ok=True)
    ca = _ca(directory, "ca")
    server = _leaf(directory, "server", ca, "serverAuth")
    client = _leaf(directory, "client", ca, "clientAuth")
    other_ca, _ = _ca(directory, "other-ca")
    self_signed_cert = directory / "self-signed.pem"
    self_signed_key = directory / "self-signed.key"
    _openssl("req", "-x509", *_KEY, "-keyout", self_signed_key, "-out", self_signed_cert,
             "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1")
    return Pki(ca[0], server[0], server[1], client[0], client[1], other_ca, self_signed_cert,
               self_signed_key)


@contextlib.contextmanager
def temporary_pki() -> Iterator[Pki]:
    directory = Path(tempfile.mkdtemp(prefix="nwb-pki-", dir="/tmp"))
    try:
        yield make_pki(directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def server_context(cert: Path, key: Path, client_ca: Path | None = None) -> ssl.SSLContext:
    """A TLS server context; with `client_ca`, a client certificate is required."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    if client_ca is not None:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(client_ca)
    return ctx
