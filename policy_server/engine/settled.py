"""What one evaluation comes to once the server has settled it: the reply, the node effects and
the pushes, the same value for every caller.

Owns ``Settled``, which the server's one settle step (``policy_server.service.settle``) makes of an
``Evaluation``: the HTTP route sends its ``body``, the test kit shows its ``reply`` (the same
bytes by construction), the resync and the node reconciler send its ``pushes`` through the bridge
and log its ``warnings``; and ``pushes_of``, which of a decision's updates leave through the
bridge (``POST /v1/updates``): a replied event's ``Decision.push``, and for the server's own
Synchronize, whose reply nobody reads, its ``update`` first. The reply is encoded from the
decision and the warnings added after it (``notes``) once, by ``policy_server.engine.reply``,
which alone fits the warnings to the contract. Must not do I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from policy_server.engine.evaluate import Evaluation
from policy_server.engine.reply import decision_to_reply, encode_reply, reply_warnings
from policy_server.sdk.decision import ContainerUpdate, Decision
from policy_server.sdk.decision_json import update_to_json
from policy_server.sdk.effects import Effect


def _json(updates: tuple[ContainerUpdate, ...]) -> tuple[dict[str, Any], ...]:
    return tuple(update_to_json(u) for u in updates if not u.resources.is_empty())


def pushes_of(decision: Decision, replied: bool) -> tuple[dict[str, Any], ...]:
    """The updates (reply JSON) that go through the bridge: ``push``, and ``update`` before it
    when there is no reply to carry it (module docstring)."""
    if replied:
        return _json(decision.push) if decision.push else ()
    return (*_json(decision.update), *_json(decision.push))


@dataclass(frozen=True, slots=True)
class Settled:
    """One settled evaluation: the reply's decision (the evaluation's, minus what could not take
    effect), the warnings after its own (the engine's and the settle step's), the pushes, and
    whether a reply is sent (the server's own Synchronize has none)."""

    evaluation: Evaluation
    decision: Decision
    notes: tuple[str, ...]
    pushes: tuple[dict[str, Any], ...]
    replied: bool = True

    @property
    def policy(self) -> str:
        return self.evaluation.policy

    @property
    def effects(self) -> tuple[Effect, ...]:
        """The node effects the decision asks for (run, or kept by the reconciler)."""
        return self.decision.effects

    @property
    def warnings(self) -> tuple[str, ...]:
        """The warnings as the reply carries them (fitted), also for a reply nobody reads."""
        return reply_warnings(self.decision, self.notes)

    @property
    def reply(self) -> dict[str, Any]:
        """The reply body (``{}``: no change; computed each time, never stored)."""
        return decision_to_reply(self.decision, self.notes)

    def body(self) -> bytes:
        """The bytes the HTTP route sends."""
        return encode_reply(self.decision, self.notes)
