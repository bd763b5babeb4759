"""benchmarks/bench_cel.py: the five rules of benchmarks/cel/five-rules.yaml with the SDK.

Owns the Python side of the comparison; it must decide exactly as the CEL policy does.
"""

from __future__ import annotations

from policy_server import Decision, Event, EventName, Policy

MAX_BYTES = 8589934592
MIN_SHARES = 2

policy = Policy("five-rules-sdk")


@policy.on(EventName.CREATE_CONTAINER)
def five_rules(event: Event) -> Decision | None:
    pod, ctr = event.pod, event.container
    if pod is None or ctr is None or pod.namespace == "kube-system":
        return None
    resources = ctr.resources
    limit = (resources.memory.limit if resources else None) or 0
    failed = []
    if not 0 < limit <= MAX_BYTES:
        failed.append(f"memory limit {limit} is not within bounds")
    if any(e.startswith("LD_PRELOAD=") for e in ctr.env):
        failed.append("LD_PRELOAD is not allowed")
    if ctr.annotations.get("io.kubernetes.cri.image-name", "").endswith(":latest"):
        failed.append("the image is tagged :latest")
    if pod.labels.get("privileged", "") == "true":
        failed.append("privileged pods are not allowed")
    if ((resources.cpu.shares if resources else None) or 0) < MIN_SHARES:
        failed.append("too few cpu shares")
    return Decision(reject="five-rules: " + "; ".join(failed)) if failed else None
