"""Example third-party policy: copy a pod label into every new container's environment.

Run it on its own (or next to koordinator-qos by leaving out ``--no-koordinator``)::

    nri-policy-server --policy-module examples/label_env_policy.py --no-koordinator \
        --uds /tmp/policy.sock
    curl -s --unix-socket /tmp/policy.sock -H 'content-type: application/json' \
        -d @examples/requests/label-env-create.json http://policy/v1/policies/label-env

Handlers are plain functions: the event in, a decision out, no I/O. Both handlers below run for
CreateContainer and their outputs are merged.
"""

from __future__ import annotations

from policy_server import Adjustment, Decision, Event, EventName, Policy

TEAM_LABEL = "example.com/team"
TEAM_ENV = "TEAM"

policy = Policy("label-env", description=f"pod label {TEAM_LABEL} -> env {TEAM_ENV}")


@policy.on(EventName.CREATE_CONTAINER)
def team_env(event: Event) -> Decision | None:
    team = event.pod.labels.get(TEAM_LABEL) if event.pod else None
    if not team:
        return None
    return Decision(adjust=Adjustment(env={TEAM_ENV: team}))


@policy.on(EventName.CREATE_CONTAINER)
def warn_unlabelled(event: Event) -> Decision | None:
    if event.pod is None or TEAM_LABEL in event.pod.labels:
        return None
    return Decision(warnings=(f"pod {event.pod.namespace}/{event.pod.name} has no {TEAM_LABEL}",))
