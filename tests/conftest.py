"""Suite-wide test settings.

Hypothesis: a shared 2-core CI machine can be slow for a moment; timing is not
what these properties check, so per-example deadlines and the "input generation
is slow" health check are off. Example counts stay as each test sets them. Runs
are derandomized (each test draws the same examples every run, so a failure in CI
is the failure on a laptop) and keep no example database (nothing written to disk).

A synchronous test runs with no current event loop (NoStrayLoop, below).
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator

import pytest
from hypothesis import HealthCheck, settings

from tests import in_process

# pytester: tests/test_in_process.py runs a small pytest of its own (strict markers).
pytest_plugins = ["pytester"]

settings.register_profile(
    "nri-webhook-bridge", deadline=None, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile("nri-webhook-bridge")


# `make check`'s selection, the in-process tests, kept true in every run: a test without the
# `processes` marker (or e2e, shipped, node_v2) cannot start a process (tests/in_process.py).
def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(in_process.Plugin(), "in-process")
    config.pluginmanager.register(NoStrayLoop(), "no-stray-loop")


class NoStrayLoop:
    """No event loop is made for a synchronous test, so none is left unclosed.

    looptime's pytest_pyfunc_call asks pytest-asyncio's (autouse) event_loop_policy for its
    loop in every test, a synchronous one too. In a thread where set_event_loop was never
    called, asyncio's policy answers that by making a new loop and keeping it as current; no
    one closes it, and the garbage collector reports it (ResourceWarning: unclosed event loop,
    and its self-pipe socketpair) on whichever test runs when it is collected. Setting "no
    loop" first makes the policy raise instead, which looptime takes as "a sync test, not
    ours". Async tests (pytest-asyncio's `asyncio` mark) keep the runner's loop.
    """

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> Generator[None, object, object]:
        if pyfuncitem.get_closest_marker("asyncio") is None:
            asyncio.set_event_loop(None)
        return (yield)
