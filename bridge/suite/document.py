"""The policy test suite's document: what `nri-webhook-bridge test` reads (docs/policy-tests.md).

Owns: the shape of a suite file as pydantic models — the webhooks under test, the node, the
cases with their manifests and expectations — with the checks one field can make on its own
(a verdict's spelling, a pattern that compiles, exactly one kind of webhook target). The JSON
Schema in schemas/test/ is generated from these models (bridge.suite.document_schema).
Must not: read files, resolve paths or run anything (bridge.suite.load, bridge.suite.run).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from bridge.kube.node import DEFAULT_NODE_CPUS
from bridge.kube.resize import parse_resize
from bridge.runtime_facts.profiles import DEFAULT_PROFILE, PROFILES

Verdict = Literal["adjusted", "unchanged", "rejected"]
QosClass = Literal["Guaranteed", "Burstable", "BestEffort"]
CgroupDriver = Literal["cgroupfs", "systemd"]  # bridge.kube.node.CGROUP_DRIVERS (a test pins them)
# An expected value: the value itself (compared with ==), or one operator mapping.
OPERATORS = ("contains", "not_contains", "matches")
# The operators whose operand is what a value holds (bridge.suite.expect.matches).
HOLDING = ("contains", "not_contains")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _compiles(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"not a regular expression: {exc}") from None
    return pattern


class Webhooks(_Strict):
    """The policies under test: a bridge configuration, one URL, or a private policy server."""

    config: str | None = Field(
        default=None,
        description="A bridge configuration file (relative to the "
        "suite): its webhooks, with every setting.",
    )
    url: str | None = Field(
        default=None, description="One webhook named `policy` with every default."
    )
    policy_modules: list[str] = Field(
        default_factory=list,
        description="Python files whose "
        "policies a private nri-policy-server serves for the run "
        "(relative to the suite); one webhook per policy.",
    )
    rules: str | None = Field(
        default=None,
        description="koordinator-qos rules for the private "
        "nri-policy-server (relative to the suite).",
    )
    policies: dict[str, str | dict[str, Any] | None] = Field(
        default_factory=dict,
        description="Built-in policies the private nri-policy-server serves (its --policy): "
        "name -> configuration file (relative to the suite), inline configuration, or null "
        "for the defaults; e.g. `cpu-pools: ../policies/cpu-pools.yaml`.",
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Environment variables of the private nri-policy-server, over the "
        "caller's: what its policy modules read (the suite pins them).",
    )

    @model_validator(mode="after")
    def _one_target(self) -> Webhooks:
        private = bool(self.policy_modules or self.rules or self.policies)
        given = [
            name
            for name, on in (
                ("config", self.config),
                ("url", self.url),
                ("policy_modules/rules/policies", private),
            )
            if on
        ]
        if len(given) != 1:
            raise ValueError(
                "give one of config, url or policy_modules/rules/policies"
                + (f", not {' and '.join(given)}" if given else "")
            )
        if self.env and not private:
            raise ValueError("env is for the private nri-policy-server (policy_modules, "
                             "rules, policies)")
        return self


class Node(_Strict):
    """The node the pods are played on (as `try`'s --node-* options)."""

    cpus: int = Field(default=DEFAULT_NODE_CPUS, gt=0)
    memory: str = Field(default="32Gi", description="Memory capacity, a Kubernetes quantity.")
    cgroup_driver: CgroupDriver = "cgroupfs"
    cgroup_version: Literal[1, 2] = 2
    profile: str = Field(
        default=DEFAULT_PROFILE,
        description="A runtime simulator profile: " + ", ".join(sorted(PROFILES)),
    )
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    pods: list[str | dict[str, Any]] = Field(
        default_factory=list,
        description="Pods already on the node: manifest files (relative to the suite) or "
        "inline documents, played before each case's own (they stay until the case ends).",
    )

    @field_validator("profile")
    @classmethod
    def _known_profile(cls, value: str) -> str:
        if value not in PROFILES:
            raise ValueError(f"unknown profile {value!r}; one of {', '.join(sorted(PROFILES))}")
        return value


class Expectation(_Strict):
    """What one pod's containers (or one of them) must end with."""

    pod: str = Field(
        description="namespace/name, or name in any namespace; shell-style "
        "wildcards (`shop/web-*` for a Deployment's pods). Every match must pass."
    )
    container: str | None = Field(
        default=None,
        description="A container name (wildcards allowed); default: every container of the pod.",
    )
    webhook: str | None = Field(
        default=None,
        description="Look only at this webhook's adjustment, "
        "reject and warnings; default: every webhook's.",
    )
    verdict: Verdict | None = Field(
        default=None,
        description="rejected: a webhook rejected; adjusted: "
        "a webhook adjusted or updated it; unchanged: neither.",
    )
    qos_class: QosClass | None = None
    cgroup_parent: str | None = Field(default=None, description="A pattern (regular expression).")
    adjust: dict[str, Any] | None = Field(
        default=None, description="Dotted path in the adjustment -> expected value (null: absent)."
    )
    effective: dict[str, Any] | None = Field(
        default=None,
        description="Dotted path in the effective values -> expected value (null: absent).",
    )
    reject: str | None = Field(
        default=None,
        description="A pattern the reject reason must match (implies verdict rejected).",
    )
    warnings: list[str] | None = Field(
        default=None,
        description="Patterns: each must match a warning; [] means no warnings at all.",
    )
    runtime: list[str] | None = Field(
        default=None,
        description="Patterns: each must match a note on what the runtime does not apply as a "
                    "reply says ('containerd 2.1.9 ignores memory.swappiness in an "
                    "adjustment'); [] means none.",
    )

    @field_validator("cgroup_parent", "reject")
    @classmethod
    def _pattern(cls, value: str | None) -> str | None:
        return None if value is None else _compiles(value)

    @field_validator("warnings", "runtime")
    @classmethod
    def _patterns(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else [_compiles(p) for p in value]

    @field_validator("adjust", "effective")
    @classmethod
    def _operators(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        for path, expected in (value or {}).items():
            if not path or any(not part for part in path.split(".")):
                raise ValueError(f"{path!r}: not a dotted path")
            operator = operator_of(expected)
            if operator is not None and operator[0] == "matches":
                _compiles(str(operator[1]))
            if operator is not None and operator[0] in HOLDING and operator[1] in ([], ""):
                # Every value holds every one of no items (and every string the empty one):
                # `contains: []` passes whatever the policy does, `not_contains: []` never.
                name, operand = operator
                raise ValueError(f"{path!r}: `{name}: {'[]' if operand == [] else chr(34) * 2}`"
                                 " says nothing; name what the value must "
                                 f"{'not ' if name == 'not_contains' else ''}contain")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Expectation:
        if self.reject is not None and self.verdict not in (None, "rejected"):
            raise ValueError(f"reject is given, so the verdict is rejected, not {self.verdict}")
        return self


def operator_of(expected: Any) -> tuple[str, Any] | None:
    """(`contains` | `not_contains` | `matches`, operand) for `{contains: X}`,
    `{not_contains: X}` / `{matches: RE}`, else None."""
    if isinstance(expected, dict) and len(expected) == 1:
        ((key, operand),) = expected.items()
        if key in OPERATORS:
            return key, operand
    return None


class Case(_Strict):
    """Manifests played through the webhooks on the node, and what must come of them."""

    name: str = Field(min_length=1)
    manifests: list[str | dict[str, Any]] = Field(
        min_length=1, description="Manifest files (relative to the suite) or inline documents."
    )
    node: Node | None = Field(default=None, description="Overrides the suite's node, key by key.")
    replicas: int | None = Field(
        default=None,
        ge=1,
        description="Pods per replicated workload (default: each one's spec.replicas).",
    )
    resize: list[str] = Field(
        default_factory=list,
        description="In-place resizes played once every container is in place (kubelet's CRI "
                    "UpdateContainerResources -> UpdateContainer): 'CONTAINER=cpu:Q,memory:Q'.",
    )
    expect: list[Expectation] = Field(min_length=1)

    @field_validator("resize")
    @classmethod
    def _resizes(cls, value: list[str]) -> list[str]:
        for text in value:
            parse_resize(text)  # ValueError: the document's error
        return value


class Suite(_Strict):
    """A policy test suite: webhooks, node, cases."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="nri-webhook-bridge test suite")

    name: str | None = Field(default=None, description="Default: the file's name.")
    webhooks: Webhooks
    node: Node = Node()  # frozen: one shared default is safe
    cases: list[Case] = Field(min_length=1)
