"""Load third-party policies given with ``--policy-module``.

A policy module is a Python file (``examples/label_env_policy.py``) or an importable module name
(``mypkg.policies``); every module-level ``Policy`` instance in it is served. Import failures
become ``PolicyLoadError`` with the cause (file, line), so the CLI can say what went wrong.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import traceback
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

from policy_server.exceptions import PolicyLoadError
from policy_server.sdk.registry import Policy


def _import_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise PolicyLoadError(f"policy module {path}: no such file")
    name = f"nri_policy_module_{path.stem}_{abs(hash(path.resolve()))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise PolicyLoadError(f"policy module {path}: cannot be imported (not a .py file?)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise PolicyLoadError(f"policy module {path}: {_describe(exc)}") from exc
    return module


def _describe(exc: BaseException) -> str:
    if isinstance(exc, SyntaxError):
        return f"syntax error at line {exc.lineno}: {exc.msg}"
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (line {frames[-1].lineno} of {frames[-1].filename})" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"


def load_module(spec: str) -> ModuleType:
    """Import a policy module given as a file path or a dotted module name."""
    if spec.endswith(".py") or "/" in spec:
        return _import_file(Path(spec))
    try:
        return importlib.import_module(spec)
    except Exception as exc:
        raise PolicyLoadError(f"policy module {spec}: {_describe(exc)}") from exc


def policies_in(module: ModuleType) -> list[Policy[Any]]:
    """Every distinct module-level ``Policy`` instance, in definition order."""
    found: list[Policy[Any]] = []
    for value in vars(module).values():
        if isinstance(value, Policy) and all(value is not p for p in found):
            found.append(value)
    return found


def load_policies(specs: Iterable[str]) -> list[Policy[Any]]:
    out: list[Policy[Any]] = []
    for spec in specs:
        found = policies_in(load_module(spec))
        if not found:
            raise PolicyLoadError(f"policy module {spec}: defines no Policy at module level")
        out.extend(found)
    return out
