"""Realistic pods and containers made from the recorded containerd 2.1.9 lifecycle.

`template()` is the recorded CreateContainer request's pod and container;
`synthetic_state()` clones them into many objects with unique ids (and,
optionally, padding annotations) to give Synchronize some weight.
"""

from __future__ import annotations

import functools
from typing import Any

from bridge.contract.catalogue import NriEvent
from bridge.proto.nri import api_pb2 as api
from bridge.simulator.scenario import load_scenario

TEMPLATE_SCENARIO = "containerd-2.1.9-events.jsonl"


@functools.cache
def _template() -> tuple[bytes, bytes]:
    for step in load_scenario(TEMPLATE_SCENARIO).events:
        if step.event is NriEvent.CREATE_CONTAINER:
            request: Any = step.request
            return request.pod.SerializeToString(), request.container.SerializeToString()
    raise LookupError(f"{TEMPLATE_SCENARIO} has no CreateContainer")


def template() -> tuple[api.PodSandbox, api.Container]:
    """Fresh copies of the recorded CreateContainer pod and container."""
    pod_bytes, container_bytes = _template()
    pod, container = api.PodSandbox(), api.Container()
    pod.ParseFromString(pod_bytes)
    container.ParseFromString(container_bytes)
    return pod, container


def synthetic_state(pods: int, containers: int, *, annotation_bytes: int = 0,
                    ) -> tuple[list[api.PodSandbox], list[api.Container]]:
    """`pods` pods and `containers` running containers spread over them.

    `annotation_bytes` adds one padding annotation of that size to every
    container (3000 containers x 2 KiB is well above the 4 MiB sync limit).
    """
    base_pod, base_container = template()
    out_pods: list[api.PodSandbox] = []
    for p in range(pods):
        pod = api.PodSandbox()
        pod.CopyFrom(base_pod)
        pod.id = f"{p:08x}" + base_pod.id[8:]
        pod.name = pod.uid = f"sim-pod-{p}"
        out_pods.append(pod)
    out_containers: list[api.Container] = []
    padding = "x" * annotation_bytes
    for c in range(containers):
        container = api.Container()
        container.CopyFrom(base_container)
        container.id = f"{c:08x}" + base_container.id[8:]
        container.name = f"ctr-{c}"
        container.state = api.CONTAINER_RUNNING
        if out_pods:
            container.pod_sandbox_id = out_pods[c % len(out_pods)].id
        if padding:
            container.annotations["sim.example.com/padding"] = padding
        out_containers.append(container)
    return out_pods, out_containers
