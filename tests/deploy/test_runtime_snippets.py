"""containerd and CRI-O NRI snippets: valid TOML, the right keys, our socket path.

The containerd key set is what `containerd config default` prints for the
NRI plugin in 1.7.24 and 2.1.9 (the versions the e2e tests run), and the same
keys the e2e harness writes; the CRI-O keys are those of CRI-O's `[crio.nri]`
table.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

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


def test_fail_closed_snippets_require_the_bridge_and_tolerate_its_own_pod() -> None:
    containerd = _load(FAIL_CLOSED_CONTAINERD)
    assert containerd["version"] == 3
    validator = containerd["plugins"][NRI_PLUGIN]["default_validator"]
    assert validator == {"enable": True, "required_plugins": [_daemonset_plugin_name()],
                         "tolerate_missing_plugins_annotation": TOLERATE_ANNOTATION}
    crio = _load(FAIL_CLOSED_CRIO)["crio"]["nri"]["default_validator"]
    assert crio == {"nri_enable_default_validator": True,
                    "nri_validator_required_plugins": [_daemonset_plugin_name()],
                    "nri_validator_tolerate_missing_plugins_annotation": TOLERATE_ANNOTATION}
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
