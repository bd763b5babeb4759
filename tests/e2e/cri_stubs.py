"""Generate and load Python gRPC stubs for the Kubernetes CRI API at test time.

Owns: turning Debian's CRI ``api.proto`` (golang-github-kubernetes-cri-api-dev) into
``runtime_api_pb2`` / ``runtime_api_pb2_grpc`` under ``tests/e2e/cri_gen/`` (git-ignored),
regenerating only when the source proto changed (under a lock: ``make e2e`` and ``make shipped``
may run side by side in one checkout).

Must not: edit the system proto. The upstream file imports gogoproto only for Go code
generation options; a temporary copy without those lines compiles with plain protoc and
is wire-identical (options do not change field numbers or types).
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import importlib
import sys
import tempfile
from pathlib import Path
from types import ModuleType

CRI_PROTO = Path("/usr/share/gocode/src/k8s.io/cri-api/pkg/apis/runtime/v1/api.proto")
GEN_DIR = Path(__file__).parent / "cri_gen"
MODULE = "runtime_api"  # the generated modules are runtime_api_pb2(_grpc)
STAMP = GEN_DIR / "source.sha256"


class CriStubError(RuntimeError):
    """The CRI proto is missing or protoc failed."""


def _strip_gogo(text: str) -> str:
    # Every gogoproto reference in this file is a whole line (an import or a file option).
    return "\n".join(line for line in text.splitlines() if "gogoproto" not in line) + "\n"


def generate(proto: Path = CRI_PROTO) -> None:
    """(Re)generate the stubs into GEN_DIR when ``proto`` changed."""
    if not proto.is_file():
        raise CriStubError(
            f"CRI proto {proto} missing: run tests/e2e/setup/install-runtimes.sh "
            "(installs golang-github-kubernetes-cri-api-dev)"
        )
    source = proto.read_text()
    digest = hashlib.sha256(source.encode()).hexdigest()
    GEN_DIR.mkdir(exist_ok=True)
    with (GEN_DIR / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the stamp is written last: complete stubs
        if not (STAMP.is_file() and STAMP.read_text().strip() == digest):
            _compile(source, proto)
            STAMP.write_text(digest + "\n")


def _compile(source: str, proto: Path) -> None:
    from grpc_tools import protoc  # dev dependency; imported lazily to keep collection cheap

    include = Path(protoc.__file__).parent / "_proto"  # google/protobuf/*.proto
    with tempfile.TemporaryDirectory(prefix="cri-proto-") as tmp:
        copy = Path(tmp) / f"{MODULE}.proto"
        copy.write_text(_strip_gogo(source))
        rc = protoc.main(
            [
                "grpc_tools.protoc",
                f"-I{tmp}",
                f"-I{include}",
                f"--python_out={GEN_DIR}",
                f"--grpc_python_out={GEN_DIR}",
                str(copy),
            ]
        )
    if rc != 0:
        raise CriStubError(f"grpc_tools.protoc failed ({rc}) on {proto}")


@functools.cache
def load() -> tuple[ModuleType, ModuleType]:
    """Return (messages module, grpc stubs module), generating them if needed."""
    generate()
    # The generated *_grpc module imports its sibling by bare name.
    if str(GEN_DIR) not in sys.path:
        sys.path.insert(0, str(GEN_DIR))
    pb2 = importlib.import_module(f"{MODULE}_pb2")
    pb2_grpc = importlib.import_module(f"{MODULE}_pb2_grpc")
    return pb2, pb2_grpc
