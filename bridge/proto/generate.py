"""Regenerate bridge/proto/{nri,cri}/*_pb2.py (and their *_pb2.pyi type stubs) from schemas/.

grpcio-tools' protoc writes both; the stubs let mypy check every use of an NRI message.

`python -m bridge.proto.generate` writes into the package; `generate(out_dir)` is
also used by the staleness test, which compares a fresh generation with what is
committed.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SCHEMA_ROOT = REPO_ROOT / "schemas"
PROTO_FILES = ("nri/api.proto", "nri/ttrpc.proto", "cri/runtime.proto")
PACKAGE_DOCS = {
    "nri": "Generated NRI and ttrpc messages (see bridge/proto/generate.py).",
    "cri": "Generated CRI messages the bridge uses (see bridge/proto/generate.py).",
}
PACKAGE_DIR = Path(__file__).resolve().parent


def generate(out_dir: Path) -> list[Path]:
    """Compile the protos into out_dir; return the generated files."""
    from grpc_tools import protoc  # dev dependency, imported only when generating

    out_dir.mkdir(parents=True, exist_ok=True)
    args = [
        "protoc",
        f"-I{SCHEMA_ROOT}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        *(str(SCHEMA_ROOT / name) for name in PROTO_FILES),
    ]
    if protoc.main(args) != 0:
        raise RuntimeError("protoc failed for " + ", ".join(PROTO_FILES))
    written: list[Path] = []
    for package, doc in PACKAGE_DOCS.items():
        (out_dir / package).mkdir(exist_ok=True)
        for stub in (out_dir / package).glob("*_pb2.pyi"):
            stub.write_text(_fix_stub(stub.read_text()))
        (out_dir / package / "__init__.py").write_text(f'"""{doc}"""\n')
        written += (p for p in (out_dir / package).iterdir() if p.is_file())
    return sorted(written)


def _fix_stub(text: str) -> str:
    """Make a generated stub valid Python.

    api.proto's Field enum has a value named `None`, which protoc copies into the stub as
    `None: ...`, a syntax error. At run time the value exists (reach it with
    `Field.Value("None")`); in the stub it is left out, with a comment saying why.
    """
    lines = []
    for line in text.splitlines(keepends=True):
        if line.lstrip().startswith("None:"):
            indent = line[: len(line) - len(line.lstrip())]
            line = f"{indent}# None: not a Python name (reach it with Field.Value(\"None\"))\n"
        lines.append(line)
    return "".join(lines)


def main() -> int:
    for path in generate(PACKAGE_DIR):
        print(f"wrote {path.relative_to(REPO_ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
