"""Which tests `make check` runs: those that run in the pytest process alone.

`make check` is the check a developer runs before each commit: no root, no apt, no tool
from `make tools`, no containerd or QEMU, no server of another project. Its tests are the
suite's in-process ones: they start no process (git aside: the repository checks read what
it tracks). A test module that starts one (the bridge or the policy server as a program, a
CLI run end to end, kubectl, promtool, dbus-daemon, nginx, a Go or Node server...) is listed
in `STARTS_PROCESSES` below and gets the `processes` marker; `make check` deselects it
(``-m "not processes"``, beside pyproject's default deselection of e2e, shipped and node_v2).

The list is kept true by every run, `make test`'s included: in a test without one of those
markers (`processes`, `e2e`, `shipped`, `node_v2`), starting a process (subprocess, asyncio's
subprocesses, fork, spawn, exec) raises `ProcessStarted`, naming this list. So `make test`,
which runs every test once, also proves `make check`'s selection.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]

# What starts processes, relative to the repository: a directory (everything under it), a
# test module, or one test function of a module (`module.py::test_name`, all its parameters)
# where the module's other tests run in-process.
STARTS_PROCESSES: tuple[str, ...] = (
    # try, test and replay as commands; the bridge and the policy server as programs.
    "tests/bridge/trial/",
    "tests/bridge/record/test_record_replay.py",
    "tests/bridge/suite/test_ci_features.py",
    "tests/bridge/suite/test_mutations.py",
    "tests/bridge/suite/test_never_vacuous.py",
    "tests/bridge/suite/test_suite_command.py::test_the_example_suites_pass",
    "tests/bridge/suite/test_suite_command.py::test_one_wrong_expectation_fails_with_a_diff",
    "tests/bridge/suite/test_suite_command.py::test_the_junit_file_parses_with_the_right_counts",
    "tests/bridge/suite/test_suite_command.py::test_a_webhook_that_cannot_be_reached_fails_the_case",
    "tests/bridge/suite/test_suite_command.py::test_a_policy_module_the_server_refuses_is_a_bad_suite",
    "tests/bridge/suite/test_suite_command.py::test_the_suites_in_readme_and_the_docs_pass_as_written",
    "tests/bridge/test_cri_lazy_import.py",
    "tests/simulator/test_launched.py",
    "tests/simulator/test_launched_config.py::test_launched_bridge_is_configured_from_the_runtime_config_string",
    "tests/simulator/test_launched_config.py::test_a_bad_config_string_is_refused_at_configure",
    "tests/integration/test_cli_process.py::test_cli_bridge_process_end_to_end",
    "tests/integration/test_operator_endpoints.py::test_metrics_listeners_and_json_logs_of_both_programs",
    "tests/integration/test_socket_ready.py::test_policy_server_processes",
    "tests/policy_server/policies/test_catalogue.py::test_cli_lists_policies_and_refuses_unknown_ones",
    "tests/policy_server/policies/test_catalogue.py::test_cli_checks_policy_configurations",
    "tests/policy_server/policies/test_cel.py::test_the_server_exits_2_on_a_misspelt_field",
    "tests/policy_server/policies/test_cel_cost.py::test_nested_comprehensions_over_request_lists_are_refused_at_load",
    "tests/policy_server/policies/test_cel_everywhere.py::test_try_runs_a_cel_file",
    "tests/policy_server/test_examples.py::test_node_policy_over_a_unix_socket",  # and node
    "tests/policy_server/test_examples.py::test_cli_serves_the_example_module",
    "tests/policy_server/test_examples.py::test_cli_startup_errors_exit_2",
    "tests/policy_server/test_node_truth_process.py",
    "tests/policy_server/test_policy_extensions.py::test_bad_policy_arguments_exit_2_with_the_reason",
    "tests/policy_server/test_policy_extensions.py::test_koordinator_is_listed_and_checked_like_any_builtin",
    "tests/policy_server/testing/test_kit_is_the_server.py::test_a_cgroup_write_gets_the_servers_warning_from_the_kit",
    "tests/policy_server/testing/test_testing_kit.py::test_the_cli_replay_of_a_served_policy_agrees",
    "tests/test_waiting.py::test_a_process_that_exits_first_fails_the_wait_at_once",
    "tests/test_waiting.py::test_until_exited_returns_the_exit_code",
    # Faults, signals and limits of real processes.
    "tests/hardening/test_huge_sync.py",
    "tests/hardening/test_node_scale_short.py",
    "tests/hardening/test_policy_faults.py",
    "tests/hardening/test_process_faults.py",
    "tests/hardening/test_process_group.py",
    "tests/hardening/test_soak.py",
    "tests/hardening/test_stop_phases.py",
    "tests/hardening/test_policy_replies.py::test_tls_failures",  # openssl
    "tests/hardening/test_security.py::test_policy_server_stops_cleanly_on_a_sigterm_sent_during_start",
    "tests/hardening/test_security.py::test_policy_socket_is_created_0600_or_0660",
    "tests/hardening/test_security.py::test_policy_server_removes_its_socket_on_a_sigterm_right_after_the_bind",
    "tests/hardening/test_security.py::test_control_socket_is_created_0660_or_as_configured",
    "tests/hardening/test_security.py::test_plain_http_to_a_remote_host_is_refused_by_validate_config",
    "tests/hardening/test_security.py::test_tls_client_certificate_and_bearer_token_end_to_end",
    "tests/hardening/test_security.py::test_a_wrong_bearer_token_is_an_http_failure",
    "tests/hardening/test_security.py::test_a_wrong_ca_fails_before_the_token_is_sent",
    "tests/e2e/test_cgroup_scope.py",  # its unmarked tests run a scope in a child process
    # Tools `make tools` installs: kubectl, promtool, dbus-daemon, Go, nginx (and apt).
    "tests/deploy/test_alert_rules.py",
    "tests/deploy/test_deployments_run.py",
    "tests/deploy/test_grafana.py",
    "tests/deploy/test_admission_manifests.py",
    "tests/deploy/test_kubernetes.py",
    "tests/policy_server/node/test_systemd_bus.py",
    "tests/servers/",
    # The attacker: a second, unprivileged uid against the real processes.
    "tests/security/",
)  # fmt: skip

# Programs an in-process test may still run: git lists the tracked files.
ALLOWED_PROGRAMS = frozenset({"git"})


class ProcessStarted(AssertionError):
    """A test selected as in-process started a process."""


def starts_processes(path: Path, function: str = "") -> bool:
    """Whether the test `function` of the module at `path` is listed: itself, its module or
    a directory above it."""
    relative = path.resolve().relative_to(ROOT).as_posix()
    return any(relative == listed or f"{relative}::{function}" == listed
               or (listed.endswith("/") and relative.startswith(listed))
               for listed in STARTS_PROCESSES)


def _program(args: Any) -> str:
    if isinstance(args, str | bytes | os.PathLike):
        first = os.fsdecode(args).split()[0] if os.fsdecode(args).strip() else ""
    elif isinstance(args, Sequence) and args:
        first = os.fsdecode(args[0])
    else:
        first = ""
    return Path(first).name


def _refuse(what: str) -> ProcessStarted:
    return ProcessStarted(
        f"this test started a process ({what}): `make check` runs only in-process tests. "
        "Add its module to STARTS_PROCESSES in tests/in_process.py (make test still runs it)")


@contextmanager
def no_processes() -> Iterator[None]:
    """While open, starting a process (other than ALLOWED_PROGRAMS) raises ProcessStarted."""
    real_init = subprocess.Popen.__init__

    def popen_init(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        program = _program(kwargs.get("executable") or args)
        if program not in ALLOWED_PROGRAMS:
            raise _refuse(f"{program or args!r} through subprocess")
        real_init(self, args, *rest, **kwargs)

    def refuse(name: str) -> Callable[..., Any]:
        def refused(*args: Any, **kwargs: Any) -> Any:
            raise _refuse(f"os.{name}")
        return refused

    patched = [name for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system",
                                 "execv", "execve", "execvp", "execvpe", "spawnv", "spawnve")
               if hasattr(os, name)]
    saved = {name: getattr(os, name) for name in patched}
    subprocess.Popen.__init__ = popen_init  # type: ignore[method-assign]
    for name in patched:
        setattr(os, name, refuse(name))
    try:
        yield
    finally:
        subprocess.Popen.__init__ = real_init  # type: ignore[method-assign]
        for name, real in saved.items():
            setattr(os, name, real)


# -- the pytest plugin (tests/conftest.py registers it, for examples/ too) ----------------------

# The markers of tests that may start processes.
MAY_START = ("processes", "e2e", "shipped", "node_v2")


class Plugin:
    """Marks the listed modules' tests `processes`; guards every other test."""

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            function = getattr(item, "originalname", item.name)
            if starts_processes(item.path, function):
                item.add_marker(pytest.mark.processes)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Iterator[None]:
        yield from self._guarded(item)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Iterator[None]:
        yield from self._guarded(item)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Iterator[None]:
        yield from self._guarded(item)

    @staticmethod
    def _guarded(item: pytest.Item) -> Iterator[None]:
        if any(item.get_closest_marker(name) for name in MAY_START):
            yield
        else:
            with no_processes():
                yield
