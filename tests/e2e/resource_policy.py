"""A tiny third-party policy for the e2e tests (served with ``--policy-module``).

It decides container resources from pod annotations, so a test can check that the
values in the container's cgroup are the ones *this policy* computed: nothing else in
the chain (CRI request, runtime defaults) knows the annotation.

- ``e2e.nri-webhook-bridge/cpu-millis: "<n>"``: cpu.shares = n * 1024 // 1000 and a CFS
  quota of n * 100 (period 100000);
- ``e2e.nri-webhook-bridge/memory-mib: "<n>"``: memory limit of n MiB;
- every container of an annotated pod also gets ``E2E_POLICY=resource-policy``.

Not a test module (no ``test_`` prefix): pytest does not collect it.
"""

from __future__ import annotations

from collections.abc import Mapping

from policy_server import Adjustment, Decision, Event, EventName, Policy, PolicyError, ResourcePatch

CPU_ANNOTATION = "e2e.nri-webhook-bridge/cpu-millis"
MEMORY_ANNOTATION = "e2e.nri-webhook-bridge/memory-mib"
ENV_KEY = "E2E_POLICY"
ENV_VALUE = "resource-policy"
MIB = 1024 * 1024

policy = Policy("e2e-resources", description="pod annotations -> cpu shares/quota, memory limit")


def shares_for(milli_cpu: int) -> int:
    return max(2, milli_cpu * 1024 // 1000)


def quota_for(milli_cpu: int) -> int:
    return milli_cpu * 100


def _int(annotations: Mapping[str, str], key: str) -> int | None:
    raw = annotations.get(key)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise PolicyError(f"{key}={raw!r} is not an integer") from None
    if value <= 0:
        raise PolicyError(f"{key}={raw!r} must be positive")
    return value


@policy.on(EventName.CREATE_CONTAINER)
def resources(event: Event) -> Decision | None:
    if event.pod is None:
        return None
    milli_cpu = _int(event.pod.annotations, CPU_ANNOTATION)
    memory_mib = _int(event.pod.annotations, MEMORY_ANNOTATION)
    if milli_cpu is None and memory_mib is None:
        return None
    patch = ResourcePatch(
        cpu_shares=shares_for(milli_cpu) if milli_cpu else None,
        cpu_quota=quota_for(milli_cpu) if milli_cpu else None,
        cpu_period=100000 if milli_cpu else None,
        memory_limit=memory_mib * MIB if memory_mib else None,
    )
    return Decision(adjust=Adjustment(env={ENV_KEY: ENV_VALUE}, resources=patch))
