"""containerd and CRI-O NRI snippets: what `nri-webhook-bridge runtime-config` prints, valid
TOML, the right keys, our socket path, the default validator's options in the fail-closed ones.

Each snippet names the command that wrote it (its second line) and must be byte for byte
what that command prints today (regenerate: run it and redirect into the file). The
containerd key set is what `containerd config default` prints for the NRI plugin in 1.7.24
and 2.1.9 (the versions the e2e tests run, which start from the file the command writes); the
CRI-O keys are those of CRI-O's `[crio.nri]` table.
"""

from __future__ import annotations

import argparse
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest

from bridge.cli import build_bridge_parser
from bridge.runtime_config import runtime_config_command
from bridge.transport import connect
from tests.deploy import support as s
from tests.e2e import runtimes

NRI_PLUGIN = "io.containerd.nri.v1.nri"
CONTAINERD_NRI_KEYS = {
    "disable", "disable_connections", "socket_path", "plugin_path", "plugin_config_path",
    "plugin_registration_timeout", "plugin_request_timeout",
}
CRIO_NRI_KEYS = {
    "enable_nri", "nri_listen", "nri_disable_connections", "nri_plugin_dir",
    "nri_plugin_config_dir", "nri_plugin_registration_timeout", "nri_plugin_request_timeout",
}
# (file, config format version, table header as written)
CONTAINERD = [
    ("containerd-1.7.toml", 2, '[plugins."io.containerd.nri.v1.nri"]'),
    ("containerd-2.x.toml", 3, "[plugins.'io.containerd.nri.v1.nri']"),
]


def _load(name: str) -> dict[str, Any]:
    with (s.RUNTIME / name).open("rb") as f:
        return tomllib.load(f)


def _go_duration_s(value: str) -> float:
    m = re.fullmatch(r"([0-9]+)(ms|s|m)", value)
    assert m, f"not a simple Go duration: {value!r}"
    return int(m.group(1)) * {"ms": 0.001, "s": 1.0, "m": 60.0}[m.group(2)]


# Fail closed (NRI >= v0.10): the default validator with the bridge as a required plugin.
FAIL_CLOSED_CONTAINERD = "containerd-2.2-fail-closed.toml"
FAIL_CLOSED_CRIO = "crio-1.34-fail-closed.conf"
TOLERATE_ANNOTATION = "tolerate-missing-nri-plugins.noderesource.dev"


def test_runtime_directory_holds_exactly_the_documented_snippets() -> None:
    names = sorted(p.name for p in s.RUNTIME.iterdir())
    assert names == sorted([name for name, _, _ in CONTAINERD]
                           + ["crio-nri.conf", FAIL_CLOSED_CONTAINERD, FAIL_CLOSED_CRIO])
    documented = (s.REPO / "docs" / "deployment.md").read_text(encoding="utf-8")
    assert all(f"`{name}`" in documented for name in names)


def _daemonset_plugin_name() -> str:
    # The DaemonSet's --plugin-name is $(PLUGIN_NAME) from the settings ConfigMap
    # (base/settings.env; tests/deploy/test_kubernetes.py checks the rendered expansion).
    text = (s.BASE / "daemonset.yaml").read_text(encoding="utf-8")
    assert "--plugin-name=$(PLUGIN_NAME)" in text
    settings = (s.BASE / "settings.env").read_text(encoding="utf-8")
    match = re.search(r"^PLUGIN_NAME=(\S+)$", settings, re.MULTILINE)
    assert match is not None
    return match.group(1)


# The default validator's options the bridge never needs a plugin to use (issue 45): on in
# both fail-closed snippets (NRI plugins/default-validator; CRI-O prefixes nri_validator_).
REJECTED = ("reject_oci_hook_adjustment", "reject_namespace_adjustment",
            "reject_runtime_default_seccomp_adjustment", "reject_unconfined_seccomp_adjustment",
            "reject_custom_seccomp_adjustment")
# The command each snippet is, beyond --runtime/--runtime-version (the fail-closed ones are
# complete: NRI's table plus the validator, used instead of the plain ones).
SNIPPET_FLAGS = {
    "containerd-1.7.toml": ["--runtime", "containerd", "--runtime-version", "1.7"],
    "containerd-2.x.toml": ["--runtime", "containerd", "--runtime-version", "2.0"],
    FAIL_CLOSED_CONTAINERD: ["--runtime", "containerd", "--runtime-version", "2.2",
                             "--fail-closed"],
    "crio-nri.conf": ["--runtime", "cri-o", "--runtime-version", "1.29"],
    FAIL_CLOSED_CRIO: ["--runtime", "cri-o", "--runtime-version", "1.34", "--fail-closed"],
}


def _named_command(text: str) -> list[str]:
    """The command a snippet names on its line 2 (`#   nri-webhook-bridge runtime-config ...`)."""
    line = text.splitlines()[1]
    assert line.startswith("#   nri-webhook-bridge runtime-config "), line
    return shlex.split(line[len("#   "):])[2:]


def _printed(argv: list[str]) -> str:
    args: argparse.Namespace = build_bridge_parser("runtime-config").parse_args(
        ["runtime-config", *argv])
    return runtime_config_command.requested_change(args)[0].text


def _stale(name: str, text: str) -> str | None:
    """Why `text` is not the snippet `name` as the command prints it today (None: it is)."""
    argv = _named_command(text)
    if argv != SNIPPET_FLAGS[name]:
        return f"{name} names {argv}, expected {SNIPPET_FLAGS[name]}"
    if _printed(argv) != text:
        return (f"{name} is stale: regenerate with `nri-webhook-bridge runtime-config "
                f"{shlex.join(argv)} > deploy/runtime/{name}`")
    return None


@pytest.mark.parametrize("name", sorted(SNIPPET_FLAGS))
def test_snippet_is_what_the_command_prints(name: str) -> None:
    assert _stale(name, (s.RUNTIME / name).read_text(encoding="utf-8")) is None


def test_a_changed_snippet_is_found_stale() -> None:
    name = "containerd-2.x.toml"
    text = (s.RUNTIME / name).read_text(encoding="utf-8")
    assert _stale(name, text.replace('"2s"', '"3s"')) is not None
    assert _stale(name, text.replace("2.0", "2.1", 1)) is not None
    assert _stale(name, text + "# a comment by hand\n") is not None


def test_snippets_name_only_paths_that_exist() -> None:
    """containerd-1.7.toml pointed at deploy/runtime/launched/, which never existed."""
    for path in sorted(s.RUNTIME.iterdir()):
        for named in re.findall(r"\b((?:deploy|docs)/[\w./-]*\w)", path.read_text()):
            assert (s.REPO / named.split("#")[0]).exists(), f"{path.name} names {named}"


def test_fail_closed_snippets_require_the_bridge_and_tolerate_its_own_pod() -> None:
    containerd = _load(FAIL_CLOSED_CONTAINERD)
    assert containerd["version"] == 3
    validator = containerd["plugins"][NRI_PLUGIN]["default_validator"]
    assert validator == {"enable": True, "required_plugins": [_daemonset_plugin_name()],
                         "tolerate_missing_plugins_annotation": TOLERATE_ANNOTATION,
                         **dict.fromkeys(REJECTED, True)}
    assert set(containerd["plugins"][NRI_PLUGIN]) == CONTAINERD_NRI_KEYS | {"default_validator"}
    crio = _load(FAIL_CLOSED_CRIO)["crio"]["nri"]["default_validator"]
    assert crio == {"nri_enable_default_validator": True,
                    "nri_validator_required_plugins": [_daemonset_plugin_name()],
                    "nri_validator_tolerate_missing_plugins_annotation": TOLERATE_ANNOTATION,
                    **{f"nri_validator_{key}": True for key in REJECTED}}
    # The bridge's own pod must be creatable while the bridge is not running.
    daemonset = (s.BASE / "daemonset.yaml").read_text(encoding="utf-8")
    assert f'{TOLERATE_ANNOTATION}: "true"' in daemonset


@pytest.mark.parametrize(("name", "version", "header"), CONTAINERD, ids=[c[0] for c in CONTAINERD])
def test_containerd_snippet(name: str, version: int, header: str) -> None:
    doc = _load(name)
    assert doc["version"] == version
    assert header in (s.RUNTIME / name).read_text(encoding="utf-8")
    nri = doc["plugins"][NRI_PLUGIN]
    assert set(nri) == CONTAINERD_NRI_KEYS
    assert nri["disable"] is False
    assert nri["disable_connections"] is False, "the bridge connects as an external plugin"
    assert nri["socket_path"] == connect.DEFAULT_SOCKET_PATH
    register = _go_duration_s(nri["plugin_registration_timeout"])
    request = _go_duration_s(nri["plugin_request_timeout"])
    assert 0 < request < register


@pytest.mark.parametrize("runtime", runtimes.RUNTIMES, ids=[r.version for r in runtimes.RUNTIMES])
def test_containerd_snippet_sets_what_the_e2e_harness_sets(runtime: runtimes.Runtime,
                                                           tmp_path: Path) -> None:
    rendered = tomllib.loads(runtimes.render_config(runtime, runtimes.InstanceDirs(tmp_path)))
    name = next(n for n, v, _ in CONTAINERD if v == runtime.config_version)
    ours = _load(name)["plugins"][NRI_PLUGIN]
    theirs = rendered["plugins"][NRI_PLUGIN]
    assert set(ours) == set(theirs)
    assert ours["plugin_request_timeout"] == theirs["plugin_request_timeout"]


def test_crio_snippet() -> None:
    nri = _load("crio-nri.conf")["crio"]["nri"]
    assert set(nri) == CRIO_NRI_KEYS
    assert nri["enable_nri"] is True
    assert nri["nri_disable_connections"] is False
    assert nri["nri_listen"] == connect.DEFAULT_SOCKET_PATH
    register = _go_duration_s(nri["nri_plugin_registration_timeout"])
    assert 0 < _go_duration_s(nri["nri_plugin_request_timeout"]) < register


@pytest.mark.parametrize("config", [s.BASE / "bridge-config.yaml", s.SYSTEMD / "config.yaml"],
                         ids=["kubernetes", "systemd"])
def test_shipped_webhook_timeouts_fit_the_shipped_request_timeout(config: Path) -> None:
    request_timeouts = {_go_duration_s(_load(n)["plugins"][NRI_PLUGIN]["plugin_request_timeout"])
                        for n, _, _ in CONTAINERD}
    request_timeouts.add(_go_duration_s(_load("crio-nri.conf")["crio"]["nri"][
        "nri_plugin_request_timeout"]))
    hooks = s.bridge_webhooks(config.read_text(encoding="utf-8"), str(config))
    assert hooks
    for hook in hooks:
        assert hook.timeout_s < min(request_timeouts)
        assert hook.sync_timeout_s < min(request_timeouts)
