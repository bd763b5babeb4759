"""The benchmark's trivial SDK policies: every new container gets env BENCH=1 and cpu.shares 512.

The same change the bridge's static handler, the Go floor plugin and the bare benchmark app make,
so every scenario of bench_webhook.py answers with one adjustment. `bench` answers every event
with the same bytes (so both programs' memories of checked replies always hit);
`bench-distinct` also annotates the container with its id, so no two replies are the same and
every reply is checked in full. Served by the shipped server:

    nri-policy-server --no-koordinator --policy-module benchmarks/trivial_policy.py --uds ...
"""

from __future__ import annotations

from policy_server import Adjustment, Decision, Event, EventName, Policy, ResourcePatch

policy = Policy("bench", description="env BENCH=1 and cpu.shares 512 on every new container")
_DECISION = Decision(adjust=Adjustment(env={"BENCH": "1"}, resources=ResourcePatch(cpu_shares=512)))


@policy.on(EventName.CREATE_CONTAINER)
def bench(event: Event) -> Decision:
    return _DECISION


distinct = Policy("bench-distinct",
                  description="as bench, plus an annotation naming the container: no two "
                  "replies alike")


@distinct.on(EventName.CREATE_CONTAINER)
def bench_distinct(event: Event) -> Decision:
    container_id = event.container.id if event.container is not None else ""
    return Decision(adjust=Adjustment(env={"BENCH": "1"}, resources=ResourcePatch(cpu_shares=512),
                                      annotations={"bench/container-id": container_id}))
