"""The life of one NRI plugin connection, as one transition table both ends follow.

Owns: the phases of a plugin connection, the protocol steps that move it, and the table of
which step moves which phase where — in the style of h11's state machine: a sans-IO object
that is told what happened and refuses what the protocol does not allow. The plugin
(bridge.nri.session) and the simulated runtime (bridge.simulator.connection) each keep a
`Lifecycle` and advance it as they send or receive the steps, so they cannot disagree on the
order. Must not: do I/O, time anything, or know which end it is used by.

The order (protocol: connect, register, configure, synchronize, then events):

    CONNECTED --RegisterPlugin--> REGISTERED --Configure--> CONFIGURED
              --Synchronize (its last chunk answered)--> SYNCHRONIZED (events flow)

and from any phase but CLOSED, `close` --> CLOSED. RegisterPlugin is the plugin's request;
the runtime may send Configure before it answers it, so each end advances on its own view:
the plugin once it has both the RegisterPlugin reply and Configure, the runtime once it has
accepted the registration and then once the plugin has answered Configure.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from types import MappingProxyType

from bridge.errors import BridgeBug


class Phase(Enum):
    CONNECTED = "connected"  # the socket is open, nothing has been said
    REGISTERED = "registered"  # RegisterPlugin sent (plugin) or accepted (runtime)
    CONFIGURED = "configured"  # Configure answered
    SYNCHRONIZED = "synchronized"  # Synchronize answered: the plugin receives events
    CLOSED = "closed"


class Step(Enum):
    REGISTER_PLUGIN = "RegisterPlugin"
    CONFIGURE = "Configure"
    SYNCHRONIZE = "Synchronize"
    CLOSE = "close"


TRANSITIONS: Mapping[tuple[Phase, Step], Phase] = MappingProxyType({
    (Phase.CONNECTED, Step.REGISTER_PLUGIN): Phase.REGISTERED,
    (Phase.REGISTERED, Step.CONFIGURE): Phase.CONFIGURED,
    (Phase.CONFIGURED, Step.SYNCHRONIZE): Phase.SYNCHRONIZED,
    **{(phase, Step.CLOSE): Phase.CLOSED for phase in Phase if phase is not Phase.CLOSED},
})


class LifecycleError(BridgeBug):
    """A step the protocol does not allow in the current phase (a bug at the caller)."""


class Lifecycle:
    """One connection's phase; `advance` applies a step or raises LifecycleError."""

    __slots__ = ("name", "phase")

    def __init__(self, name: str) -> None:
        self.name = name  # for errors: "session", "plugin 10-bridge"
        self.phase = Phase.CONNECTED

    def advance(self, step: Step) -> Phase:
        after = TRANSITIONS.get((self.phase, step))
        if after is None:
            raise LifecycleError(f"{self.name} cannot take {step.value} when "
                                 f"{self.phase.value}")
        self.phase = after
        return after

    @property
    def closed(self) -> bool:
        return self.phase is Phase.CLOSED
