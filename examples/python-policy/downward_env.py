"""A third-party style policy: tell each container who it is, through its environment.

Every new container gets ``POD_NAME``, ``POD_NAMESPACE``, ``POD_UID`` and ``CONTAINER_NAME``
(what Kubernetes' downward API would need a manifest change for). A container that sets one of
these itself keeps its own value, and the policy says so in a warning. Tested with the policy
test kit in ``test_downward_env.py``; serve it with::

    nri-policy-server --no-koordinator --uds /tmp/policy.sock \
        --policy-module examples/python-policy/downward_env.py
"""

from __future__ import annotations

from policy_server import Adjustment, Decision, Event, EventName, Policy

policy = Policy("downward-env", description="POD_NAME, POD_NAMESPACE, POD_UID, CONTAINER_NAME")


@policy.on(EventName.CREATE_CONTAINER)
def identity_env(event: Event) -> Decision | None:
    if event.pod is None or event.container is None:
        return None
    wanted = {
        "POD_NAME": event.pod.name,
        "POD_NAMESPACE": event.pod.namespace,
        "POD_UID": event.pod.uid,
        "CONTAINER_NAME": event.container.name,
    }
    own = event.container.env_map()
    env = {k: v for k, v in wanted.items() if v and k not in own}
    kept = sorted(k for k in wanted if k in own)
    warnings = (f"{event.container.name}: keeps its own {', '.join(kept)}",) if kept else ()
    if not env:
        return Decision(warnings=warnings) if warnings else None
    return Decision(adjust=Adjustment(env=env), warnings=warnings)
