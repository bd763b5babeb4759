"""Webhook configuration: defaults, URL splitting, key-naming errors, validate-config exit codes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bridge.cli import main
from bridge.config_file import load_text
from bridge.control.settings import parse_control
from bridge.errors import ConfigError
from bridge.webhooks.kinds import DEFAULT_ALLOW
from bridge.webhooks.specs import (
    DEFAULT_EVENTS,
    Mode,
    WebhookFailurePolicy,
    parse_duration,
    parse_webhooks,
    webhook_from_url,
)

REPO = Path(__file__).resolve().parents[3]


def _one(**kw: Any) -> Any:
    return parse_webhooks([{"name": "p", "url": "unix:///run/p.sock", **kw}])[0]


def test_defaults() -> None:
    spec = _one()
    assert spec.events == frozenset(DEFAULT_EVENTS)
    assert (spec.timeout_s, spec.sync_timeout_s) == (1.0, 1.0)
    assert spec.failure_policy is WebhookFailurePolicy.IGNORE and spec.mode is Mode.ENFORCE
    assert spec.allow == DEFAULT_ALLOW and spec.selector.matches_all
    assert (spec.breaker.failure_threshold, spec.breaker.cool_down_s) == (5, 10.0)


@pytest.mark.parametrize(("url", "socket", "path"), [
    ("unix:///run/policy.sock/v1/policies/koordinator-qos", "/run/policy.sock",
     "/v1/policies/koordinator-qos"),
    ("unix:///run/policy.sock", "/run/policy.sock", "/"),
    ("unix:///run/dir.sock.d/p.sock/x?y=1", "/run/dir.sock.d/p.sock", "/x?y=1"),
    ("unix:///var/run/policy", "/var/run/policy", "/"),
])
def test_unix_url_splits_after_the_sock_component(url: str, socket: str, path: str) -> None:
    endpoint = _one(url=url).endpoint
    assert (endpoint.socket_path, endpoint.path) == (socket, path)


def test_tcp_urls() -> None:
    endpoint = _one(url="https://policy.example:8443/v1/x").endpoint
    assert (endpoint.base_url, endpoint.path, endpoint.socket_path is None) == (
        "https://policy.example:8443", "/v1/x", True)
    assert _one(url="http://[::1]:80/p").endpoint.base_url == "http://[::1]:80"
    assert _one(url="http://10.0.0.1/p", allow_insecure_http=True).endpoint.path == "/p"


@pytest.mark.parametrize(("doc", "key", "problem"), [
    ({"timeout": "5h"}, "webhooks[0].timeout", "expected a duration"),
    ({"timeout": 0}, "webhooks[0].timeout", "more than 0"),
    ({"timeout": "90s"}, "webhooks[0].timeout", "at most 60s"),
    ({"url": "http://10.0.0.1/p"}, "webhooks[0].url", "plain http to non-loopback"),
    ({"url": "unix://host/p.sock"}, "webhooks[0].url", "three slashes"),
    ({"url": "ftp://x/y"}, "webhooks[0].url", "expected unix://"),
    ({"events": ["Bogus"]}, "webhooks[0].events[0]", "Input should be"),
    ({"events": []}, "webhooks[0].events", "at least one"),
    ({"events": ["CreateContainer", "CreateContainer"]}, "webhooks[0].events", "twice"),
    ({"failure_policy": "Never"}, "webhooks[0].failure_policy", "'Ignore' or 'Fail'"),
    ({"mode": "dry"}, "webhooks[0].mode", "'enforce' or 'shadow'"),
    ({"allow": ["mountz"]}, "webhooks[0].allow[0]", "unknown kind 'mountz'"),
    ({"bogus": 1}, "webhooks[0].bogus", "unknown key"),
    ({"name": "Bad Name"}, "webhooks[0].name", "must be 1-63"),
    ({"tls": {"ca_file": "/nonexistent"}}, "webhooks[0].tls", "applies only to https"),
    ({"url": "https://x/p", "tls": {"ca_file": "/nonexistent"}}, "webhooks[0].tls.ca_file",
     "/nonexistent: does not exist"),
    ({"url": "https://x/p", "tls": {"cert_file": "/etc/hostname"}}, "webhooks[0].tls",
     "go together"),
    ({"bearer_token_file": "/nonexistent"}, "webhooks[0].bearer_token_file", "does not exist"),
    ({"circuit_breaker": {"failure_threshold": 0}},
     "webhooks[0].circuit_breaker.failure_threshold", "greater than or equal to 1"),
    ({"pod_label_selector": {"matchExpressions": [{"key": "a", "operator": "In"}]}},
     "webhooks[0].pod_label_selector.matchExpressions[0].values", "In needs values"),
    ({"pod_label_selector": {"matchLabels": {"a": 1}}},
     "webhooks[0].pod_label_selector.matchLabels.a", "valid string"),
])
def test_errors_name_the_key(doc: dict[str, Any], key: str, problem: str) -> None:
    base = {"name": "p", "url": "unix:///run/p.sock"}
    with pytest.raises(ConfigError) as caught:
        parse_webhooks([{**base, **doc}])
    assert caught.value.key == key
    assert problem in caught.value.problem


def test_second_webhook_errors_and_duplicates() -> None:
    with pytest.raises(ConfigError, match=r"webhooks\[1\]\.timeout"):
        parse_webhooks([{"name": "a", "url": "unix:///a.sock"},
                        {"name": "b", "url": "unix:///b.sock", "timeout": "x"}])
    with pytest.raises(ConfigError, match=r"webhooks\[1\]\.name: duplicate"):
        parse_webhooks([{"name": "a", "url": "unix:///a.sock"},
                        {"name": "a", "url": "unix:///b.sock"}])


def test_durations() -> None:
    assert parse_duration("500ms") == 0.5
    assert parse_duration("1.5s") == 1.5
    assert parse_duration("1m") == 60.0
    assert parse_duration(2) == 2.0
    with pytest.raises(ValueError):
        parse_duration(True)


def test_policy_url_shortcut() -> None:
    spec = webhook_from_url("unix:///run/p.sock/v1/x")
    assert spec.name == "policy" and spec.endpoint.path == "/v1/x"
    with pytest.raises(ConfigError, match=r"^--policy-url: "):
        webhook_from_url("gopher://x")


def test_control_section() -> None:
    settings = parse_control({"socket": "/run/x/c.sock", "address": "127.0.0.1:9090",
                              "socket_mode": "0600"})
    assert (settings.socket_path, settings.address, settings.socket_mode) == (
        "/run/x/c.sock", ("127.0.0.1", 9090), 0o600)
    assert parse_control({"socket": None}).socket_path is None
    with pytest.raises(ConfigError, match=r"control\.address: 0\.0\.0\.0 is not a loopback"):
        parse_control({"address": "0.0.0.0:9090"})
    with pytest.raises(ConfigError, match=r"control\.socket_mode"):
        parse_control({"socket_mode": "rw"})


def test_metrics_address_may_be_any_interface_unlike_the_control_address() -> None:
    # GET /metrics alone is served there, so a pod IP (0.0.0.0, [::]) is fine.
    assert parse_control({"metrics_address": "0.0.0.0:9464"}).metrics_address == (
        "0.0.0.0", 9464)
    assert parse_control({"metrics_address": "[::]:9464"}).metrics_address == ("::", 9464)
    assert parse_control({}).metrics_address is None
    for bad in ("9464", "0.0.0.0:", "0.0.0.0:70000", ":9464"):
        with pytest.raises(ConfigError, match=r"^control\.metrics_address: expected HOST:PORT"):
            parse_control({"metrics_address": bad})
    with pytest.raises(ConfigError, match=r"^control\.metrics_address: expected HOST:PORT"):
        parse_control({"metrics_address": 9464})


def test_metrics_address_flag_overrides_the_file() -> None:
    from bridge.cli import _apply_flags, build_bridge_parser

    config = load_text("control:\n  metrics_address: 127.0.0.1:1\n", "f.yaml")
    args = build_bridge_parser("run").parse_args(["run", "--metrics-address", "0.0.0.0:9464"])
    assert _apply_flags(config, args).control.metrics_address == ("0.0.0.0", 9464)
    args = build_bridge_parser("run").parse_args(["run", "--metrics-address", "nope"])
    with pytest.raises(ConfigError, match=r"^--metrics-address: expected HOST:PORT"):
        _apply_flags(config, args)


def test_whole_file_and_top_level_errors() -> None:
    config = load_text("webhooks:\n  - name: a\n    url: unix:///a.sock\n    timeout: 250ms\n"
                       "control:\n  socket: /run/b/c.sock\n", "f.yaml")
    assert config.webhooks[0].timeout_s == 0.25
    assert config.control.socket_path == "/run/b/c.sock" and config.control.explicit_socket
    with pytest.raises(ConfigError, match=r"^webhooks: "):
        load_text("webhooks: nope\n", "f.yaml")


@pytest.mark.parametrize("path", ["deploy/systemd/config.yaml",
                                  "deploy/kubernetes/base/bridge-config.yaml"])
def test_shipped_configs_validate(path: str, capsys: pytest.CaptureFixture[str]) -> None:
    if not (REPO / path).exists():
        pytest.skip(f"{path} not in this checkout")
    assert main(["validate-config", str(REPO / path)]) == 0
    assert capsys.readouterr().out.endswith(": ok\n")


def test_validate_config_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("webhooks:\n  - name: a\n    url: unix:///a.sock\n"
                   "  - name: b\n    url: unix:///b.sock\n    timeout: soon\n")
    assert main(["validate-config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "webhooks[1].timeout: expected a duration" in err
    assert main(["validate-config", str(tmp_path / "missing.yaml")]) == 2


def test_update_flags_override_the_file() -> None:
    from bridge.cli import _apply_flags, build_bridge_parser

    config = load_text("updates: {route: nri, cri_socket: /a/cri.sock}", "f.yaml")
    args = build_bridge_parser("run").parse_args(["run", "--cri-socket", "/b/cri.sock",
                                           "--update-route", "cri"])
    updates = _apply_flags(config, args).updates
    assert (updates.route, updates.cri_socket) == ("cri", "/b/cri.sock")
    untouched = _apply_flags(config, build_bridge_parser("run").parse_args(["run"])).updates
    assert (untouched.route, untouched.cri_socket) == ("nri", "/a/cri.sock")
    args = build_bridge_parser("run").parse_args(["run", "--cri-socket", "cri.sock"])
    with pytest.raises(ConfigError, match=r"^--cri-socket: must be an absolute path"):
        _apply_flags(config, args)
