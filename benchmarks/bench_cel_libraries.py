"""The three CEL libraries on PyPI, side by side on a real CreateContainer request.

Owns the measurement behind the `cel` policy's choice of library (docs/policies/cel.md): five
rules a node policy writes, evaluated over schemas/webhook/examples/CreateContainer.request.json,
the event bound once per request, whole and (last column) only the part the rules read, as the
policy binds it. Only cel-expr-python is a dependency; the
others are measured when installed (``pip install common-expression-language cel-python`` in a
scratch venv). Must not be imported by the products.
"""

from __future__ import annotations

import importlib.util
import json
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parents[1] / "schemas/webhook/examples"
REQUEST = EXAMPLES / "CreateContainer.request.json"
RULES = (
    "pod.namespace != 'kube-system'",
    "container.name.startsWith('a') || container.name.matches('^[a-z]+$')",
    "has(container.linux.resources.memory.limit)"
    " && container.linux.resources.memory.limit <= 8589934592",
    "container.env.all(e, !e.startsWith('LD_PRELOAD='))",
    "!('privileged' in pod.labels) || pod.labels['privileged'] != 'true'",
)


def read_part(req: dict[str, Any]) -> dict[str, Any]:
    """Only what RULES read, as the cel policy binds a request (policies/cel/request_view.py)."""
    pod, ctr = req["pod"], req["container"]
    return {
        "pod": {"namespace": pod["namespace"], "labels": pod["labels"]},
        "container": {"name": ctr["name"], "env": ctr["env"],
                      "linux": {"resources": {"memory": ctr["linux"]["resources"]["memory"]}}},
    }


def per_call_us(fn: Callable[[], object], n: int) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e6


def cel_expr_python(req: dict[str, Any]) -> tuple[float, float]:
    from cel_expr_python import cel

    env = cel.NewEnv(variables={"pod": cel.Type.DYN, "container": cel.Type.DYN})
    progs = [env.compile(rule) for rule in RULES]

    def bind() -> Any:
        return env.Activation({"pod": req["pod"], "container": req["container"]})

    def run() -> list[object]:
        act = bind()
        return [p.eval(act).value() for p in progs]

    assert all(run())
    return per_call_us(bind, 5000), per_call_us(run, 5000)


def common_expression_language(req: dict[str, Any]) -> tuple[float, float]:
    import cel  # type: ignore[import-not-found]

    def bind() -> Any:
        ctx = cel.Context()
        ctx.add_variable("pod", req["pod"])
        ctx.add_variable("container", req["container"])
        return ctx

    progs = [cel.compile(rule) for rule in RULES]  # compiled once, as the others are

    def run() -> list[object]:
        ctx = bind()
        return [p.execute(ctx) for p in progs]

    assert all(run())
    return per_call_us(bind, 5000), per_call_us(run, 5000)


def cel_python(req: dict[str, Any]) -> tuple[float, float]:
    import celpy  # type: ignore[import-not-found]

    env = celpy.Environment()
    progs = [env.program(env.compile(rule)) for rule in RULES]

    def bind() -> dict[str, Any]:
        return {key: celpy.json_to_cel(req[key]) for key in ("pod", "container")}

    def run() -> list[object]:
        act = bind()
        return [p.evaluate(act) for p in progs]

    assert all(run())
    return per_call_us(bind, 200), per_call_us(run, 200)


LIBRARIES = {
    "cel-expr-python": ("cel_expr_python", cel_expr_python),
    "common-expression-language": ("cel", common_expression_language),
    "cel-python": ("celpy", cel_python),
}


def main() -> None:
    req = json.loads(REQUEST.read_text())
    print(f"# {platform.machine()} {platform.processor()} Python {sys.version.split()[0]}")
    print(f"{'library':28} {'bind event µs':>14} {'bind + 5 rules µs':>18} "
          f"{'same, read part only µs':>24}")
    for name, (module, measure) in LIBRARIES.items():
        spec = importlib.util.find_spec(module)
        ours = Path(__file__).resolve().parent / module  # benchmarks/cel/ is not the Rust `cel`
        if spec is None or ours in map(Path, spec.submodule_search_locations or ()):
            print(f"{name:28} not installed")
            continue
        bind_us, run_us = measure(req)
        _, part_us = measure(read_part(req))
        print(f"{name:28} {bind_us:14.1f} {run_us:18.1f} {part_us:24.1f}")


if __name__ == "__main__":
    main()
