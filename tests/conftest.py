"""Suite-wide test settings.

Hypothesis: a shared 2-core CI machine can be slow for a moment; timing is not
what these properties check, so per-example deadlines and the "input generation
is slow" health check are off. Example counts stay as each test sets them. Runs
are derandomized (each test draws the same examples every run, so a failure in CI
is the failure on a laptop) and keep no example database (nothing written to disk).
"""

from __future__ import annotations

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
