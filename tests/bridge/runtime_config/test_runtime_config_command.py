"""`nri-webhook-bridge runtime-config`: the change per runtime and version, `--write` keeping
the file's other content and comments, idempotence, and the refusals (exit 2, named)."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

import pytest

from bridge import cli
from bridge.runtime_config import toml_change
from bridge.runtime_config.runtime_tables import RuntimeConfigError

NRI = "io.containerd.nri.v1.nri"
TIMEOUTS = ("plugin_registration_timeout", "plugin_request_timeout")

# A node's containerd 1.7 file as operators keep them: comments, NRI off, a timeout written
# into the CRI plugin's table (where containerd ignores it), tables in any order.
NODE_1_7 = """\
version = 2
# Managed by hand; ask ops before changing.
root = "/var/lib/containerd"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.9"  # pinned
  # someone thought this was the NRI timeout
  plugin_request_timeout = "10s"

[plugins."io.containerd.nri.v1.nri"]
  # NRI stays off until the bridge is rolled out
  disable = true   # flip me
  socket_path = "/var/run/nri/nri.sock"

[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "overlayfs"
"""


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["runtime-config", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def containerd(version: str, *extra: str) -> list[str]:
    return ["--runtime", "containerd", "--runtime-version", version, *extra]


def nri_table(doc: dict[str, Any]) -> dict[str, Any]:
    table = doc["plugins"][NRI]
    assert isinstance(table, dict)
    return table


@pytest.mark.parametrize(("version", "config_version", "header"), [
    ("1.7", 2, '[plugins."io.containerd.nri.v1.nri"]'),
    ("1.7.24", 2, '[plugins."io.containerd.nri.v1.nri"]'),
    ("2.1.9", 3, "[plugins.'io.containerd.nri.v1.nri']"),
    ("2.2", 3, "[plugins.'io.containerd.nri.v1.nri']"),
    ("2.3.4", 4, "[plugins.'io.containerd.nri.v1.nri']"),
    ("2.4.0", 4, "[plugins.'io.containerd.nri.v1.nri']"),
])
def test_containerd_change_per_version(capsys: pytest.CaptureFixture[str], version: str,
                                       config_version: int, header: str) -> None:
    code, out, _ = run(capsys, *containerd(version))
    assert code == 0
    doc = tomllib.loads(out)
    assert doc["version"] == config_version
    assert header in out.splitlines()
    nri = nri_table(doc)
    assert nri["disable"] is False and nri["disable_connections"] is False
    assert nri["socket_path"] == "/var/run/nri/nri.sock"
    assert (nri["plugin_registration_timeout"], nri["plugin_request_timeout"]) == ("5s", "2s")
    assert set(doc) == {"version", "plugins"} and set(doc["plugins"]) == {NRI}


def test_crio_change_is_its_nri_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--runtime", "cri-o", "--runtime-version", "1.36.3",
                       "--request-timeout", "3s")
    assert code == 0
    doc = tomllib.loads(out)
    assert set(doc) == {"crio"} and set(doc["crio"]) == {"nri"}
    nri = doc["crio"]["nri"]
    assert nri["enable_nri"] is True and nri["nri_disable_connections"] is False
    assert nri["nri_listen"] == "/var/run/nri/nri.sock"
    assert nri["nri_plugin_request_timeout"] == "3s"
    assert nri["nri_plugin_registration_timeout"] == "5s"


def test_write_keeps_comments_and_other_content(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.toml"
    path.write_text(NODE_1_7)
    code, out, err = run(capsys, *containerd("1.7.24", "--file", str(path), "--write"))
    assert code == 0 and out == ""
    text = path.read_text()
    # Every original line is still there, in order, but the one value that had to change.
    original = [line for line in NODE_1_7.splitlines() if "disable = true" not in line]
    lines = iter(text.splitlines())
    assert all(any(line == got for got in lines) for line in original), text
    assert "  disable = false   # flip me" in text.splitlines()
    before, after = tomllib.loads(NODE_1_7), tomllib.loads(text)
    nri = nri_table(after)
    assert nri["disable"] is False and nri["plugin_request_timeout"] == "2s"
    # Everything outside the NRI table is as it was, the misplaced timeout included.
    del before["plugins"][NRI], after["plugins"][NRI]
    assert after == before
    # What changed is said, and the misplaced key is named with its table.
    assert 'plugins."io.containerd.nri.v1.nri".disable = false (was true)' in err
    assert ('warning: plugins."io.containerd.grpc.v1.cri".plugin_request_timeout: an NRI '
            "setting's name in plugins.\"io.containerd.grpc.v1.cri\"") in err


def test_write_is_idempotent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.toml"
    path.write_text(NODE_1_7)
    argv = containerd("1.7.24", "--file", str(path), "--write")
    assert run(capsys, *argv)[0] == 0
    first = path.read_bytes()
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    code, _, err = run(capsys, *argv)
    assert code == 0 and "unchanged" in err
    assert path.read_bytes() == first
    assert path.stat().st_mtime_ns == 1_000_000_000, "an unchanged file is not rewritten"
    # Printing without --write gives the same text.
    assert run(capsys, *containerd("1.7.24", "--file", str(path)))[1] == first.decode()


# (the default validator exists from containerd 2.2: refusals below)
@pytest.mark.parametrize(("version", "fail_closed"), [
    ("1.7.24", False), ("2.1.9", False), ("2.2.7", False), ("2.2.7", True), ("2.3.4", True)])
def test_the_change_applied_twice_is_the_change_once(tmp_path: Path, version: str,
                                                     fail_closed: bool,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.toml"
    version_line = "version = 2\n" if version.startswith("1.") else "version = 3\n"
    path.write_text(version_line + "# only a comment\n")
    argv = containerd(version, "--file", str(path), "--write",
                      *(["--fail-closed"] if fail_closed else []))
    assert run(capsys, *argv)[0] == 0
    once = path.read_text()
    assert "# only a comment" in once
    assert run(capsys, *argv)[0] == 0
    assert path.read_text() == once


def test_a_missing_file_is_created_and_a_file_keeps_its_mode(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    new = tmp_path / "conf.d" / "nri.toml"
    assert run(capsys, *containerd("2.1", "--file", str(new), "--write"))[0] == 0
    assert tomllib.loads(new.read_text())["version"] == 3
    assert new.read_text().startswith("# NRI for containerd 2.1 (config version 3), written by")
    assert new.stat().st_mode & 0o777 == 0o644
    private = tmp_path / "private.toml"
    private.write_text("version = 3\n")
    private.chmod(0o600)
    assert run(capsys, *containerd("2.1", "--file", str(private), "--write"))[0] == 0
    assert private.stat().st_mode & 0o777 == 0o600
    assert list(tmp_path.glob(".private.toml.*")) == [], "no temporary file left behind"


def test_fail_closed_turns_the_default_validator_on(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, *containerd("2.2", "--fail-closed"))
    assert code == 0
    validator = nri_table(tomllib.loads(out))["default_validator"]
    assert validator == {
        "enable": True,
        "reject_oci_hook_adjustment": True,
        "reject_namespace_adjustment": True,
        "reject_runtime_default_seccomp_adjustment": True,
        "reject_unconfined_seccomp_adjustment": True,
        "reject_custom_seccomp_adjustment": True,
        "required_plugins": ["webhook-bridge"],
        "tolerate_missing_plugins_annotation": "tolerate-missing-nri-plugins.noderesource.dev",
    }
    code, out, _ = run(capsys, "--runtime", "cri-o", "--runtime-version", "1.34",
                       "--fail-closed", "--allow-adjustment", "oci-hooks",
                       "--required-plugin", "a", "--required-plugin", "50-b")
    crio = tomllib.loads(out)["crio"]["nri"]["default_validator"]
    assert crio["nri_enable_default_validator"] is True
    assert crio["nri_validator_reject_oci_hook_adjustment"] is False
    assert crio["nri_validator_reject_namespace_adjustment"] is True
    assert crio["nri_validator_required_plugins"] == ["a", "50-b"]


def test_allowing_an_adjustment_turns_its_rejection_off_in_a_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.toml"
    assert run(capsys, *containerd("2.3", "--file", str(path), "--write", "--fail-closed"))[0] == 0
    assert run(capsys, *containerd("2.3", "--file", str(path), "--write", "--fail-closed",
                                   "--allow-adjustment", "seccomp"))[0] == 0
    validator = nri_table(tomllib.loads(path.read_text()))["default_validator"]
    assert validator["reject_custom_seccomp_adjustment"] is False
    assert validator["reject_oci_hook_adjustment"] is True


@pytest.mark.parametrize(("argv", "named"), [
    (containerd("1.7.24", "--fail-closed"), "--fail-closed: containerd 1.7 vendors NRI v0.6.1"),
    (containerd("2.1.9", "--fail-closed"), "--fail-closed: containerd 2.1 vendors NRI v0.8.0"),
    (["--runtime", "cri-o", "--runtime-version", "1.33", "--fail-closed"], "--fail-closed"),
    (containerd("1.6.20"), "--runtime-version: containerd 1.6.20 has no NRI plugin"),
    (containerd("seven"), "--runtime-version: 'seven' is not a version"),
    (containerd("2.1", "--request-timeout", "2"), "--request-timeout: '2' is not a Go duration"),
    (containerd("2.1", "--request-timeout", "0s"), "--request-timeout: '0s' must be longer"),
    (containerd("2.1", "--socket-path", "nri.sock"), "--socket-path: 'nri.sock' is not an abs"),
    (containerd("2.1", "--write"), "--write: needs --file"),
    (containerd("2.2", "--required-plugin", "x"), "--required-plugin: only with --fail-closed"),
    (containerd("2.2", "--fail-closed", "--required-plugin", "a b"), "--required-plugin: 'a b'"),
    (containerd("2.2", "--fail-closed", "--tolerate-annotation", "a b"),
     "--tolerate-annotation: 'a b' is not an annotation key"),
])
def test_refusals_name_the_flag(capsys: pytest.CaptureFixture[str], argv: list[str],
                                named: str) -> None:
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    assert named in err


@pytest.mark.parametrize(("text", "version", "named"), [
    ('version = 2\n[plugins\n', "1.7", ":2:9: not TOML: Expected ']'"),
    ('version = 2\na = 1\na = 2\n', "1.7", ":3:"),
    ('root = "/var/lib/containerd"\n', "2.1", "version: missing"),
    ('version = "2"\n', "2.1", "version: '2' is not an integer"),
    ("version = 3\n", "1.7", "containerd config format 3; containerd 1.7 reads format 2"),
    ("version = 4\n", "2.2", "format 4; containerd 2.2 reads formats 2 to 3"),
    ('version = 3\nplugins = "x"\n', "2.1", "plugins: is a value, not a table"),
    (f'version = 3\n[plugins]\n"{NRI}" = 1\n', "2.1", "plugins.'io.containerd.nri.v1.nri': is a"),
])
def test_a_file_it_cannot_use_is_refused_and_untouched(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, version: str,
        named: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(text)
    code, out, err = run(capsys, *containerd(version, "--file", str(path), "--write"))
    assert (code, out) == (2, "")
    assert f"{path}" in err and named in err, err
    assert path.read_text() == text


def test_an_inline_nri_table_that_cannot_take_the_validator_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.toml"
    text = f'version = 3\n[plugins]\n"{NRI}" = {{ disable = true }}\n'
    path.write_text(text)
    code, _, err = run(capsys, *containerd("2.2", "--file", str(path), "--write",
                                           "--fail-closed"))
    assert code == 2 and "cannot be merged into this file" in err
    assert path.read_text() == text


def test_the_result_check_refuses_a_wrong_merge(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check that guards every result: a merge that loses or adds anything is refused."""
    from bridge.runtime_config import runtime_tables

    tgt = runtime_tables.target("containerd", "2.1")
    from bridge.runtime_config import nri_settings

    entries = nri_settings.entries(tgt, nri_settings.NriSettings())
    monkeypatch.setattr(toml_change, "_toml", lambda value: '"wrong"')
    with pytest.raises(RuntimeConfigError, match="without changing other settings"):
        toml_change.set_entries("version = 3\n", "f", tgt, entries)


def test_an_nri_table_there_only_as_the_validators_parent_gets_its_own_header(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f"version = 3\n[plugins.'{NRI}'.default_validator]\n  enable = false  # c\n")
    assert run(capsys, *containerd("2.2", "--file", str(path), "--write", "--fail-closed"))[0] == 0
    text = path.read_text()
    assert "  enable = true  # c" in text.splitlines()
    assert f"[plugins.'{NRI}']" in text.splitlines()
    nri = nri_table(tomllib.loads(text))
    assert nri["disable"] is False and nri["default_validator"]["enable"] is True
