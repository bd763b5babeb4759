"""The simulator's one exception: `SimulatorError`, misuse of the simulated runtime.

In a module of its own so every simulator module (the runtime, its CRI calls, the trial's
player) raises and catches it without importing the runtime class.
"""


class SimulatorError(Exception):
    """Misuse of the simulator (unknown event, event the profile does not have, ...)."""
