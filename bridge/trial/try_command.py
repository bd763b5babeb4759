"""`nri-webhook-bridge try MANIFEST...`: what each webhook does to a pod, without a node.

Owns: the subcommand's arguments, reading the manifests and the bridge config, building the
node (bridge.kube.NodeSpec), running the trial (bridge.trial.play) and printing the results
(bridge.trial.report); with --policy-module/--rules, around a private policy server
(bridge.trial.private_server). Exit codes: 0 ok; 1 a webhook rejected; 2 bad input
(manifests, config, options) — and then nothing is sent to any policy; 3 a webhook call
failed (whatever its failure policy or mode: a trial with a failed call says nothing about
the policy), which goes before 1. JSON output has sorted keys, so the same manifests give
the same bytes.
Must not: translate pods or talk to the runtime itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from bridge import strict_yaml
from bridge.config_file import parse
from bridge.contract import quantity
from bridge.errors import ConfigError
from bridge.kube import CriPod, ManifestError, NodeSpec, PodSpec, read_manifests, translate
from bridge.kube.node import CGROUP_DRIVERS, DEFAULT_NODE_CPUS, DEFAULT_NODE_NAME
from bridge.kube.resize import Resize, parse_resize
from bridge.runtime_facts.profiles import DEFAULT_PROFILE, PROFILES, RuntimeProfile
from bridge.trial import report
from bridge.trial.play import TrialError, TrialResult, run_trial
from bridge.trial.private_server import PolicySetupError, PrivatePolicies, private_server
from bridge.trial.stdout_pipe import reader_may_leave

EXIT_OK, EXIT_REJECTED, EXIT_USAGE, EXIT_CALL_FAILED = 0, 1, 2, 3
# Node labels kubelet's PodTopologyLabels admission copies onto pods (what a policy can see).
TOPOLOGY_LABELS = ("topology.kubernetes.io/zone", "topology.kubernetes.io/region")
HOSTNAME_LABEL = "kubernetes.io/hostname"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("manifests", nargs="+", metavar="MANIFEST",
                   help="Kubernetes manifests (YAML or JSON, multi-document; - for stdin)")
    target = p.add_mutually_exclusive_group()
    target.add_argument("--config", metavar="FILE", help="bridge configuration (its webhooks)")
    target.add_argument("--policy-url", metavar="URL", help="one webhook, named `policy`")
    p.add_argument("--policy-module", metavar="FILE", action="append", default=[],
                   help="instead of --config/--policy-url: serve every Policy in this Python "
                        "file from a private nri-policy-server started for the run, one "
                        "webhook per policy (repeatable)")
    p.add_argument("--rules", metavar="FILE",
                   help="instead of --config/--policy-url: koordinator-qos with these rules, "
                        "from the same private nri-policy-server")
    p.add_argument("--policy", metavar="NAME[=CONFIG]", action="append", default=[],
                   help="instead of --config/--policy-url: the built-in policy NAME (e.g. "
                        "cpu-pools), configured from the YAML file CONFIG, from the same "
                        "private nri-policy-server (repeatable)")
    p.add_argument("--node-cpus", type=int, default=DEFAULT_NODE_CPUS, metavar="N",
                   help="the node's CPUs (default %(default)s)")
    p.add_argument("--node-numa-nodes", type=int, default=1, metavar="N",
                   help="the node's NUMA (memory) nodes, the CPUs split evenly over them "
                        "(default %(default)s)")
    p.add_argument("--node-memory", default="32Gi", metavar="QUANTITY",
                   help="the node's memory capacity (default %(default)s); Burstable OOM "
                        "scores are relative to it")
    p.add_argument("--cgroup-driver", choices=CGROUP_DRIVERS, default="cgroupfs")
    p.add_argument("--cgroup-version", type=int, choices=(1, 2), default=2)
    p.add_argument("--profile", choices=sorted(PROFILES), default=DEFAULT_PROFILE,
                   metavar="NAME", help="runtime simulator profile (default %(default)s; "
                                        f"one of {', '.join(sorted(PROFILES))})")
    p.add_argument("--node-labels", default="", metavar="K=V,...",
                   help="the node's labels (kubernetes.io/hostname names the node; topology "
                        "labels are copied onto pods)")
    p.add_argument("--node-annotations", default="", metavar="K=V,...",
                   help="the node's annotations")
    p.add_argument("--resize", action="append", default=[], metavar="CONTAINER=cpu:Q,memory:Q",
                   help="once CONTAINER is in place, resize it in place as kubelet does (CRI "
                        "UpdateContainerResources -> NRI UpdateContainer), e.g. "
                        "app=cpu:500m,memory:256Mi (repeatable)")
    p.add_argument("--output", choices=("table", "json"), default="table")
    p.add_argument("--strict", action="store_true",
                   help="refuse documents that make no pod (a Service, a ConfigMap, a custom "
                        "resource) instead of skipping them with a note")
    p.add_argument("--replicas", type=int, metavar="N",
                   help="pods per Deployment, StatefulSet, ReplicaSet and ReplicationController "
                        "(default: each one's spec.replicas), all played onto the one node")


# Options whose value may start with '-' (`--node-memory -1Gi`): argparse would take the value
# for an unknown option and answer with its usage text; attached as `--opt=value`, the value
# reaches our own checks, which answer in one line.
_VALUE_OPTIONS = ("--node-memory", "--node-cpus", "--node-numa-nodes", "--replicas")


def attach_values(argv: list[str]) -> list[str]:
    """`argv` with `--opt -value` written `--opt=-value` for the options above."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] in _VALUE_OPTIONS and i + 1 < len(argv) and argv[i + 1].startswith("-") \
                and argv[i + 1] != "-":
            out.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


def main(args: argparse.Namespace) -> int:
    try:
        node = _node(args)
        private = _private_policies(args)
        if not private:
            document = _config_document(args)
            config = parse(document, args.config or "--policy-url")
            if not config.webhooks:
                raise ConfigError("webhooks", "the configuration has no webhooks to try")
        if args.replicas is not None and args.replicas < 1:
            raise ValueError(f"--replicas: must be at least 1, got {args.replicas}")
        resizes = tuple(parse_resize(text) for text in args.resize)
        manifests = read_manifests(args.manifests, strict=args.strict, replicas=args.replicas)
        pods = [translate(with_topology(p, node), node) for p in manifests.pods]
    except (ManifestError, ConfigError, ValueError) as exc:
        print(f"nri-webhook-bridge try: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for note in manifests.skipped:
        print(f"nri-webhook-bridge try: note: {note}", file=sys.stderr)
    if not pods:
        print("nri-webhook-bridge try: the manifests describe no pods", file=sys.stderr)
        return EXIT_USAGE
    # The simulator warns of every failed event; the report already names each one.
    logging.getLogger("bridge.simulator").setLevel(logging.ERROR)
    try:
        if private:
            trial = asyncio.run(_run_private(replace(private, node=node), pods,
                                             PROFILES[args.profile], resizes))
        else:
            trial = asyncio.run(run_trial(pods, config, document, PROFILES[args.profile],
                                          resizes, node))
    except (PolicySetupError, ConfigError) as exc:
        print(f"nri-webhook-bridge try: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except TrialError as exc:
        print(f"nri-webhook-bridge try: {exc}", file=sys.stderr)
        return EXIT_REJECTED
    objects = report.results(trial)
    with reader_may_leave():  # `try --output json | head`: no BrokenPipeError traceback
        if args.output == "json":
            json.dump(objects, sys.stdout, indent=2, sort_keys=True)
            sys.stdout.write("\n")
        else:
            print(report.table(objects))
    failed = report.failures(trial)
    for line in failed:
        print(f"nri-webhook-bridge try: call failed: {line}", file=sys.stderr)
    if failed:
        print(f"nri-webhook-bridge try: {len(failed)} webhook call(s) failed", file=sys.stderr)
        return EXIT_CALL_FAILED
    return EXIT_REJECTED if report.rejected(objects) else EXIT_OK


def _private_policies(args: argparse.Namespace) -> PrivatePolicies:
    """--policy-module/--rules (a private server), or none when --config/--policy-url."""
    builtins = tuple((name, config or None) for name, _, config
                     in (value.partition("=") for value in args.policy))
    private = PrivatePolicies(tuple(args.policy_module), args.rules, args.cgroup_version,
                              builtins)
    given = [flag for flag, on in (("--config", args.config), ("--policy-url", args.policy_url),
                                   ("--policy-module/--rules/--policy", private)) if on]
    if len(given) != 1:
        raise ValueError("give one of --config, --policy-url or --policy-module/--rules/--policy"
                         + (f", not {' and '.join(given)}" if given else ""))
    private.check()
    return private


async def _run_private(private: PrivatePolicies, pods: list[CriPod],
                       profile: RuntimeProfile, resizes: tuple[Resize, ...] = ()) -> TrialResult:
    """The trial against a private policy server, started and stopped around it."""
    work = Path(tempfile.mkdtemp(prefix="nri-try-policy-"))  # mode 0700
    try:
        async with private_server(private, work) as document:
            config = parse(document, "--policy-module/--rules")
            if not config.webhooks:
                raise ConfigError("--policy-module", "the modules define no policy that "
                                                     "handles an event")
            return await run_trial(pods, config, document, profile, resizes, private.node)
    except OSError as exc:
        raise TrialError(f"cannot run the trial: {exc}") from exc
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _config_document(args: argparse.Namespace) -> dict[str, Any]:
    if args.policy_url:
        return {"webhooks": [{"name": "policy", "url": args.policy_url}]}
    try:
        with open(args.config, encoding="utf-8") as f:
            document = yaml.safe_load(f)
    except OSError as exc:
        raise ConfigError("--config", f"cannot read {args.config}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError("--config", f"{args.config}: not YAML: {strict_yaml.one_line(exc)}",
                          ) from None
    if not isinstance(document, dict):
        raise ConfigError("--config", f"{args.config} is not a mapping")
    return document


def _node(args: argparse.Namespace) -> NodeSpec:
    if args.node_cpus <= 0:
        raise ValueError(f"--node-cpus: must be positive, got {args.node_cpus}")
    if not 1 <= args.node_numa_nodes <= args.node_cpus:
        raise ValueError(f"--node-numa-nodes: must be 1 to --node-cpus ({args.node_cpus}), "
                         f"got {args.node_numa_nodes}")
    try:
        memory = quantity.value(quantity.parse_quantity(args.node_memory))
    except quantity.QuantityError as exc:
        raise ValueError(f"--node-memory: {exc}") from None
    if memory <= 0:
        raise ValueError(f"--node-memory: must be positive, got {args.node_memory!r}")
    labels = _pairs(args.node_labels, "--node-labels")
    return NodeSpec(cpus=args.node_cpus, memory_bytes=memory, cgroup_driver=args.cgroup_driver,
                    cgroup_version=args.cgroup_version, numa_nodes=args.node_numa_nodes,
                    name=dict(labels).get(HOSTNAME_LABEL, DEFAULT_NODE_NAME), labels=labels,
                    annotations=_pairs(args.node_annotations, "--node-annotations"))


def _pairs(text: str, flag: str) -> tuple[tuple[str, str], ...]:
    out = []
    for item in filter(None, (s.strip() for s in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{flag}: expected KEY=VALUE, got {item!r}")
        out.append((key, value))
    return tuple(out)


def with_topology(pod: PodSpec, node: NodeSpec) -> PodSpec:
    """`pod` with the node's topology labels, as the PodTopologyLabels admission copies them."""
    copied = {k: v for k, v in node.labels if k in TOPOLOGY_LABELS}
    if not copied:
        return pod
    return replace(pod, labels=tuple(sorted({**dict(pod.labels), **copied}.items())))


