"""Reading a suite file into what a run needs, or every problem it has, each naming the file,
line and field.

Owns: parsing the YAML (bridge.strict_yaml: a key given twice is an error), validating it
(bridge.suite.document; problems by bridge.suite.problems), resolving the files it names
relative to the suite, building each case's node (bridge.kube.NodeSpec) and reading and
translating its manifests — the node's pods first — exactly as `try` does (bridge.kube), the
bridge configuration of a `config` or `url` target or the private server's policies, and what
the expectations name (bridge.suite.checks). Everything that can be wrong with a suite is found
here, before any policy is called — except the webhook names a private server serves, checked
when it has started (LoadedSuite.check_webhooks) — and a `SuiteError` is exit 2.
Must not: start anything or call a webhook.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from bridge import strict_yaml
from bridge.config_file import BridgeConfig, parse
from bridge.contract import quantity
from bridge.errors import ConfigError
from bridge.kube import (
    CriPod,
    ManifestError,
    NodeSpec,
    manifests_from,
    parse_documents,
    read_manifest_documents,
    translate,
)
from bridge.kube.resize import Resize, parse_resize
from bridge.runtime_facts.profiles import PROFILES, RuntimeProfile
from bridge.suite.checks import names_problems, webhook_problems
from bridge.suite.document import Case, Expectation, Node, Suite
from bridge.suite.problems import Problem, SuiteError, from_validation, with_lines
from bridge.trial.private_server import PrivatePolicies
from bridge.trial.try_command import HOSTNAME_LABEL, with_topology


@dataclass(frozen=True, slots=True)
class Target:
    """The webhooks under test: a configuration (document and parsed), or a private server."""

    document: dict[str, Any] | None = None
    config: BridgeConfig | None = None
    private: PrivatePolicies | None = None


@dataclass(frozen=True, slots=True)
class LoadedCase:
    name: str
    pods: tuple[CriPod, ...]
    profile: RuntimeProfile
    cgroup_version: int
    expect: tuple[Expectation, ...]
    resizes: tuple[Resize, ...] = ()
    node: NodeSpec = field(default_factory=NodeSpec)  # what the bridge and server see


@dataclass(frozen=True, slots=True)
class LoadedSuite:
    path: str
    name: str
    target: Target
    cases: tuple[LoadedCase, ...]
    lines: dict[strict_yaml.Path, int]  # key path -> line in the file

    def check_webhooks(self, names: list[str]) -> None:
        """SuiteError when an expectation names a webhook not among `names`."""
        problems = webhook_problems(((i, c.expect) for i, c in enumerate(self.cases)), names,
                                    self.lines)
        if problems:
            raise SuiteError(self.path, problems=problems)


def load_suite(path: str) -> LoadedSuite:
    """The suite at `path`, checked through; SuiteError (with every problem found) otherwise."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SuiteError(path, "", f"cannot read: {exc}") from None
    try:
        document, lines = strict_yaml.load_with_lines(text, path)
    except yaml.YAMLError as exc:
        raise SuiteError(path, "", f"not YAML: {strict_yaml.one_line(exc)}") from None
    if not isinstance(document, dict):
        raise SuiteError(path, "", "expected a mapping with webhooks and cases")
    try:
        suite = Suite.model_validate(document)
    except ValidationError as exc:
        raise SuiteError(path, problems=from_validation(exc, Suite, lines)) from None
    base = Path(path).parent
    problems: list[Problem] = []
    target = Target()
    try:
        target = _target(path, base, suite)
    except SuiteError as exc:
        problems += exc.problems
    cases = []
    for i, c in enumerate(suite.cases):
        try:
            cases.append(_case(path, base, suite.node, i, c, lines))
        except SuiteError as exc:
            problems += exc.problems
    if target.config is not None:
        problems += webhook_problems(((i, c.expect) for i, c in enumerate(suite.cases)),
                                     [w.name for w in target.config.webhooks], lines)
    if problems:
        raise SuiteError(path, problems=with_lines(problems, lines))
    return LoadedSuite(path, suite.name or Path(path).name, target, tuple(cases), lines)


def _file(path: str, base: Path, field: str, name: str, directory: bool = False) -> str:
    """``name`` relative to the suite: a file (``directory``: or a directory, as a built-in
    policy's configuration may be: ``cel: DIR``)."""
    resolved = base / name
    if not (resolved.is_file() or (directory and resolved.is_dir())):
        what = "no such file or directory" if directory else "no such file"
        raise SuiteError(path, field, f"{name}: {what} (relative to the suite)")
    return str(resolved)


def _target(path: str, base: Path, suite: Suite) -> Target:
    hooks = suite.webhooks
    if hooks.policy_modules or hooks.rules or hooks.policies:
        modules = tuple(_file(path, base, f"webhooks.policy_modules[{i}]", m)
                        for i, m in enumerate(hooks.policy_modules))
        rules = _file(path, base, "webhooks.rules", hooks.rules) if hooks.rules else None
        builtins = tuple((name, _file(path, base, f"webhooks.policies.{name}", config, True)
                          if isinstance(config, str) else config)
                         for name, config in hooks.policies.items())
        return Target(private=PrivatePolicies(modules, rules, suite.node.cgroup_version,
                                              builtins, tuple(hooks.env.items())))
    if hooks.url is not None:
        document: Any = {"webhooks": [{"name": "policy", "url": hooks.url}]}
        where = "webhooks.url"
    else:
        assert hooks.config is not None  # the model allows exactly one target
        where = "webhooks.config"
        config_path = _file(path, base, where, hooks.config)
        try:
            document = strict_yaml.load_yaml(Path(config_path).read_text(encoding="utf-8"),
                                        config_path)
        except yaml.YAMLError as exc:
            raise SuiteError(path, where, f"{hooks.config}: not YAML: "
                             f"{strict_yaml.one_line(exc)}") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise SuiteError(path, where, f"cannot read {hooks.config}: {exc}") from None
    try:
        config = parse(document, where)
    except ConfigError as exc:
        raise SuiteError(path, where, str(exc)) from None
    if not config.webhooks:
        raise SuiteError(path, where, "the configuration has no webhooks to test")
    return Target(document=document, config=config)


def _case(path: str, base: Path, suite_node: Node, index: int, case: Case,
          lines: dict[strict_yaml.Path, int]) -> LoadedCase:
    field = f"cases[{index}]"
    node_model = suite_node if case.node is None else suite_node.model_copy(
        update=case.node.model_dump(exclude_unset=True))
    node = _node(path, f"{field}.node" if case.node and "memory" in case.node.model_fields_set
                 else "node", node_model)
    # The node's pods (the case's node.pods, else the suite's) first, then the case's own.
    node_field = f"{field}.node.pods" if case.node and "pods" in case.node.model_fields_set \
        else "node.pods"
    try:
        on_node = manifests_from(_documents(path, base, node_field, node_model.pods))
    except ManifestError as exc:
        raise SuiteError(path, node_field, str(exc)) from None
    try:
        manifests = manifests_from(_documents(path, base, f"{field}.manifests", case.manifests),
                                   replicas=case.replicas)
    except ManifestError as exc:
        raise SuiteError(path, f"{field}.manifests", str(exc),
                         line=strict_yaml.line_of(lines, ("cases", index, "manifests"))) from None
    if not manifests.pods:
        raise SuiteError(path, f"{field}.manifests", "the manifests describe no pods")
    pods = tuple(translate(with_topology(p, node), node)
                 for p in (*on_node.pods, *manifests.pods))
    problems = names_problems(case.expect, pods, index, lines)
    if problems:
        raise SuiteError(path, problems=problems)
    return LoadedCase(case.name, pods, PROFILES[node_model.profile], node_model.cgroup_version,
                      tuple(case.expect), tuple(parse_resize(text) for text in case.resize),
                      node)


def _documents(path: str, base: Path, field: str,
               entries: list[str | dict[str, Any]]) -> Iterator[tuple[str, Any]]:
    for j, entry in enumerate(entries):
        if isinstance(entry, str):
            yield from read_manifest_documents([_file(path, base, f"{field}[{j}]", entry)])
        else:  # an inline document: messages name the suite and the field
            yield from parse_documents(yaml.safe_dump(entry), f"{path} {field}[{j}]")


def _node(path: str, field: str, node: Node) -> NodeSpec:
    try:
        memory = quantity.value(quantity.parse_quantity(node.memory))
    except quantity.QuantityError as exc:
        raise SuiteError(path, f"{field}.memory", str(exc)) from None
    if memory <= 0:
        raise SuiteError(path, f"{field}.memory", f"must be positive, got {node.memory!r}")
    labels = tuple(node.labels.items())
    return NodeSpec(cpus=node.cpus, memory_bytes=memory, cgroup_driver=node.cgroup_driver,
                    cgroup_version=node.cgroup_version,
                    name=node.labels.get(HOSTNAME_LABEL, NodeSpec().name), labels=labels,
                    annotations=tuple(node.annotations.items()))
