"""`nri-webhook-bridge try MANIFEST...`: what each webhook does to a pod, without a node.

Owns: the subcommand's arguments, reading the manifests and the bridge config, building the
node (bridge.kube.NodeSpec), running the trial (bridge.trial.play) and printing the results
(bridge.trial.report). Exit codes: 0 ok; 1 a webhook rejected (or a failed call under
failure_policy Fail stopped a container); 2 bad input (manifests, config, options) — and then
nothing is sent to any policy.
Must not: translate pods or talk to the runtime itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import replace
from typing import Any

import yaml

from bridge.config_file import parse
from bridge.contract import quantity
from bridge.errors import ConfigError
from bridge.kube import ManifestError, NodeSpec, Pod, load_pods, translate
from bridge.kube.node import CGROUP_DRIVERS, DEFAULT_NODE_CPUS, DEFAULT_NODE_NAME
from bridge.simulator.profiles import DEFAULT_PROFILE, PROFILES
from bridge.trial import report
from bridge.trial.play import TrialError, run_trial

EXIT_OK, EXIT_REJECTED, EXIT_USAGE = 0, 1, 2
# Node labels kubelet's PodTopologyLabels admission copies onto pods (what a policy can see).
TOPOLOGY_LABELS = ("topology.kubernetes.io/zone", "topology.kubernetes.io/region")
HOSTNAME_LABEL = "kubernetes.io/hostname"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("manifests", nargs="+", metavar="MANIFEST",
                   help="Kubernetes manifests (YAML or JSON, multi-document; - for stdin)")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--config", metavar="FILE", help="bridge configuration (its webhooks)")
    target.add_argument("--policy-url", metavar="URL", help="one webhook, named `policy`")
    p.add_argument("--node-cpus", type=int, default=DEFAULT_NODE_CPUS, metavar="N",
                   help="the node's CPUs (default %(default)s)")
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
    p.add_argument("--output", choices=("table", "json"), default="table")


def main(args: argparse.Namespace) -> int:
    try:
        node = _node(args)
        document = _config_document(args)
        config = parse(document, args.config or "--policy-url")
        if not config.webhooks:
            raise ConfigError("webhooks", "the configuration has no webhooks to try")
        pods = [translate(_with_topology(p, node), node) for p in load_pods(args.manifests)]
    except (ManifestError, ConfigError, ValueError) as exc:
        print(f"nri-webhook-bridge try: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not pods:
        print("nri-webhook-bridge try: the manifests describe no pods", file=sys.stderr)
        return EXIT_USAGE
    try:
        trial = asyncio.run(run_trial(pods, config, document, PROFILES[args.profile]))
    except TrialError as exc:
        print(f"nri-webhook-bridge try: {exc}", file=sys.stderr)
        return EXIT_REJECTED
    objects = report.results(trial)
    if args.output == "json":
        json.dump(objects, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(report.table(objects))
    return EXIT_REJECTED if report.rejected(objects) else EXIT_OK


def _config_document(args: argparse.Namespace) -> dict[str, Any]:
    if args.policy_url:
        return {"webhooks": [{"name": "policy", "url": args.policy_url}]}
    try:
        with open(args.config, encoding="utf-8") as f:
            document = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError("--config", f"cannot read {args.config}: {exc}") from None
    if not isinstance(document, dict):
        raise ConfigError("--config", f"{args.config} is not a mapping")
    return document


def _node(args: argparse.Namespace) -> NodeSpec:
    if args.node_cpus <= 0:
        raise ValueError(f"--node-cpus: must be positive, got {args.node_cpus}")
    try:
        memory = quantity.value(quantity.parse(args.node_memory))
    except quantity.QuantityError as exc:
        raise ValueError(f"--node-memory: {exc}") from None
    if memory <= 0:
        raise ValueError("--node-memory: must be positive")
    labels = _pairs(args.node_labels, "--node-labels")
    return NodeSpec(cpus=args.node_cpus, memory_bytes=memory, cgroup_driver=args.cgroup_driver,
                    cgroup_version=args.cgroup_version,
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


def _with_topology(pod: Pod, node: NodeSpec) -> Pod:
    copied = {k: v for k, v in node.labels if k in TOPOLOGY_LABELS}
    if not copied:
        return pod
    return replace(pod, labels=tuple(sorted({**dict(pod.labels), **copied}.items())))


