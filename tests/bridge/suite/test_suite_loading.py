"""Issue 34, "also found": everything wrong with a suite is found before any case runs (exit 2)
and said at once, each problem with its file, field and line; manifests the API server would
refuse are manifest errors naming the document and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from bridge.cli import build_bridge_parser
from bridge.suite import suite_command

REPO = Path(__file__).resolve().parents[3]
HEAD = "webhooks: {url: 'unix:///nonexistent.sock/p'}\n"
POD = "{kind: Pod, metadata: {name: p}, spec: {containers: [{name: c, image: i}]}}"


def main(tmp_path: Path, text: str, *extra: str) -> int:
    (tmp_path / "suite.yaml").write_text(text)
    return suite_command.main(build_bridge_parser("test").parse_args(
        ["test", str(tmp_path / "suite.yaml"), *extra]))


def errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> list[str]:
    out, err = capsys.readouterr()
    assert out == ""  # nothing ran
    prefix = f"nri-webhook-bridge test: {tmp_path}/"
    assert all(line.startswith(prefix) for line in err.splitlines()), err
    return [line.removeprefix(prefix) for line in err.splitlines()]


def test_every_problem_is_shown_with_its_line(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    text = HEAD + ("cases:\n"
                   "  - name: a\n"
                   f"    manifests: [{POD}]\n"
                   "    expect:\n"
                   "      - pod: p\n"
                   "        verdict: changed\n"
                   "  - name: b\n"
                   "    manifest: [pod.yaml]\n"
                   "    expect: [{pod: p, qos: Guaranteed}]\n")
    assert main(tmp_path, text) == 2
    assert errors(capsys, tmp_path) == [
        "suite.yaml:7: cases[0].expect[0].verdict: Input should be 'adjusted', 'unchanged' or "
        "'rejected'",
        "suite.yaml:9: cases[1].manifest: unknown key; did you mean manifests?",
        "suite.yaml:10: cases[1].expect[0].qos: unknown key; did you mean qos_class?",
    ]  # and no `cases[1].manifests: required`


def test_a_yaml_syntax_error_names_the_file_and_line(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert main(tmp_path, HEAD + "cases: [{name: a\n") == 2
    (line,) = errors(capsys, tmp_path)
    assert line.startswith("suite.yaml: not YAML: line 3, column 1: a '{' opened on line 2 is "
                           "not closed with '}' (parser: expected ',' or '}'")
    assert "<unicode string>" not in line


def test_names_in_expect_that_match_nothing_are_found_before_running(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = HEAD + ("cases:\n"
                   f"  - name: a\n    manifests: [{POD}]\n"
                   "    expect:\n"
                   "      - {pod: q, verdict: unchanged}\n"
                   "      - {pod: default/p, container: app, verdict: unchanged}\n"
                   "      - {pod: 'p*', container: 'c*'}\n")
    assert main(tmp_path, text) == 2
    assert errors(capsys, tmp_path) == [
        "suite.yaml:6: cases[0].expect[0].pod: 'q' matches no pod of the case (pods: default/p)",
        "suite.yaml:7: cases[0].expect[1].container: 'app' matches no container of default/p "
        "(containers: c)",
    ]


@pytest.mark.parametrize("junit", ["nodir/out.xml", "."])
def test_an_unwritable_junit_path_is_found_before_running(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        junit: str) -> None:
    monkeypatch.chdir(tmp_path)
    text = HEAD + f"cases: [{{name: a, manifests: [{POD}], expect: [{{pod: p}}]}}]\n"
    assert main(tmp_path, text, "--junit", junit) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"nri-webhook-bridge test: --junit {junit}: "), err


@pytest.mark.parametrize(("metadata", "problem"), [
    ("{name: p, annotations: {big: BIG}}",
     "(Pod p): metadata.annotations: 5000003 bytes in all; the API server refuses more than "
     "262144 (256 KiB)"),
    ("{name: p, labels: {'team name': x}}",
     "(Pod p): metadata.labels.team name: key 'team name': the name must be"),
    ("{name: p, labels: {team: 'a b'}}", "(Pod p): metadata.labels.team: value 'a b': must be"),
    ("{name: p, annotations: {'Example.com/x': y}}",
     "(Pod p): metadata.annotations.Example.com/x: key 'Example.com/x': the prefix must be a "
     "DNS subdomain"),
    ("{name: P}", ": metadata.name: 'P' is not a DNS subdomain name"),
])
def test_what_the_api_server_refuses_is_a_manifest_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], metadata: str, problem: str) -> None:
    (tmp_path / "pod.yaml").write_text(
        f"kind: Pod\nmetadata: {metadata.replace('BIG', 'x' * 5_000_000)}\n"
        "spec: {containers: [{name: c, image: i}]}\n")
    text = HEAD + "cases: [{name: a, manifests: [pod.yaml], expect: [{pod: p}]}]\n"
    assert main(tmp_path, text) == 2
    (line,) = errors(capsys, tmp_path)
    assert line.startswith(f"suite.yaml:2: cases[0].manifests: {tmp_path}/pod.yaml"
                           + (" " if problem.startswith("(") else "") + problem)
