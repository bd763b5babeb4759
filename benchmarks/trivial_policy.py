"""The benchmark's trivial SDK policy: every new container gets env BENCH=1 and cpu.shares 512.

The same change the bridge's static handler, the Go floor plugin and the bare benchmark app make,
so every scenario of bench_webhook.py answers with one adjustment. Served by the shipped server:

    nri-policy-server --no-koordinator --policy-module benchmarks/trivial_policy.py --uds ...
"""

from __future__ import annotations

from policy_server import Adjustment, Decision, Event, EventName, Policy, ResourcePatch

policy = Policy("bench", description="env BENCH=1 and cpu.shares 512 on every new container")
_DECISION = Decision(adjust=Adjustment(env={"BENCH": "1"}, resources=ResourcePatch(cpu_shares=512)))


@policy.on(EventName.CREATE_CONTAINER)
def bench(event: Event) -> Decision:
    return _DECISION
