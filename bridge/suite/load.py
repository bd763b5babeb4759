"""Reading a suite file into what a run needs, or one clear error naming the file and field.

Owns: parsing the YAML, validating it (bridge.suite.document), resolving the files it names
relative to the suite, building each case's node (bridge.kube.NodeSpec) and reading and
translating its manifests exactly as `try` does (bridge.kube), and the bridge configuration
of a `config` or `url` target. Everything that can be wrong with a suite is found here,
before any policy is called: a `SuiteError` is exit 2.
Must not: start anything or call a webhook.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from bridge.config_file import BridgeConfig, parse
from bridge.contract import quantity
from bridge.errors import ConfigError
from bridge.kube import (
    CriPod,
    ManifestError,
    NodeSpec,
    manifests_from,
    parse_documents,
    read_documents,
    translate,
)
from bridge.kube.resize import Resize, parse_resize
from bridge.runtime_facts.profiles import PROFILES, RuntimeProfile
from bridge.suite.document import Case, Expectation, Node, Suite
from bridge.trial.private_server import PrivatePolicies
from bridge.trial.try_command import HOSTNAME_LABEL, with_topology


class SuiteError(Exception):
    """A bad suite: `path: field: problem`."""

    def __init__(self, path: str, field: str, problem: str) -> None:
        super().__init__(f"{path}: {field + ': ' if field else ''}{problem}")
        self.path, self.field, self.problem = path, field, problem


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


@dataclass(frozen=True, slots=True)
class LoadedSuite:
    path: str
    name: str
    target: Target
    cases: tuple[LoadedCase, ...]


def load(path: str) -> LoadedSuite:
    """The suite at `path`, checked through; SuiteError otherwise."""
    try:
        document = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise SuiteError(path, "", f"cannot read: {exc}") from None
    except yaml.YAMLError as exc:
        raise SuiteError(path, "", f"not YAML: {exc}") from None
    if not isinstance(document, dict):
        raise SuiteError(path, "", "expected a mapping with webhooks and cases")
    try:
        suite = Suite.model_validate(document)
    except ValidationError as exc:
        error = ConfigError.first_of(exc.errors(), "")
        raise SuiteError(path, error.key, error.problem) from None
    base = Path(path).parent
    return LoadedSuite(path, suite.name or Path(path).name, _target(path, base, suite),
                       tuple(_case(path, base, suite.node, i, c)
                             for i, c in enumerate(suite.cases)))


def _file(path: str, base: Path, field: str, name: str) -> str:
    resolved = base / name
    if not resolved.is_file():
        raise SuiteError(path, field, f"{name}: no such file (relative to the suite)")
    return str(resolved)


def _target(path: str, base: Path, suite: Suite) -> Target:
    hooks = suite.webhooks
    if hooks.policy_modules or hooks.rules:
        modules = tuple(_file(path, base, f"webhooks.policy_modules[{i}]", m)
                        for i, m in enumerate(hooks.policy_modules))
        rules = _file(path, base, "webhooks.rules", hooks.rules) if hooks.rules else None
        return Target(private=PrivatePolicies(modules, rules, suite.node.cgroup_version))
    if hooks.url is not None:
        document: Any = {"webhooks": [{"name": "policy", "url": hooks.url}]}
        where = "webhooks.url"
    else:
        assert hooks.config is not None  # the model allows exactly one target
        where = "webhooks.config"
        config_path = _file(path, base, where, hooks.config)
        try:
            document = yaml.safe_load(Path(config_path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise SuiteError(path, where, f"cannot read {hooks.config}: {exc}") from None
    try:
        config = parse(document, where)
    except ConfigError as exc:
        raise SuiteError(path, where, str(exc)) from None
    if not config.webhooks:
        raise SuiteError(path, where, "the configuration has no webhooks to test")
    return Target(document=document, config=config)


def _case(path: str, base: Path, suite_node: Node, index: int, case: Case) -> LoadedCase:
    field = f"cases[{index}]"
    node_model = suite_node if case.node is None else suite_node.model_copy(
        update=case.node.model_dump(exclude_unset=True))
    node = _node(path, f"{field}.node" if case.node and "memory" in case.node.model_fields_set
                 else "node", node_model)
    try:
        manifests = manifests_from(_documents(path, base, field, case), replicas=case.replicas)
    except ManifestError as exc:
        raise SuiteError(path, f"{field}.manifests", str(exc)) from None
    if not manifests.pods:
        raise SuiteError(path, f"{field}.manifests", "the manifests describe no pods")
    pods = tuple(translate(with_topology(p, node), node) for p in manifests.pods)
    return LoadedCase(case.name, pods, PROFILES[node_model.profile], node_model.cgroup_version,
                      tuple(case.expect), tuple(parse_resize(text) for text in case.resize))


def _documents(path: str, base: Path, field: str, case: Case) -> Iterator[tuple[str, Any]]:
    for j, entry in enumerate(case.manifests):
        if isinstance(entry, str):
            yield from read_documents([_file(path, base, f"{field}.manifests[{j}]", entry)])
        else:  # an inline document: messages name the suite and the field
            yield from parse_documents(yaml.safe_dump(entry), f"{path} {field}.manifests[{j}]")


def _node(path: str, field: str, node: Node) -> NodeSpec:
    try:
        memory = quantity.value(quantity.parse(node.memory))
    except quantity.QuantityError as exc:
        raise SuiteError(path, f"{field}.memory", str(exc)) from None
    if memory <= 0:
        raise SuiteError(path, f"{field}.memory", f"must be positive, got {node.memory!r}")
    labels = tuple(node.labels.items())
    return NodeSpec(cpus=node.cpus, memory_bytes=memory, cgroup_driver=node.cgroup_driver,
                    cgroup_version=node.cgroup_version,
                    name=node.labels.get(HOSTNAME_LABEL, NodeSpec().name), labels=labels,
                    annotations=tuple(node.annotations.items()))
