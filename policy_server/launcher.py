"""The ``nri-policy-server`` script: the stop signals are caught before the program loads.

Owns: the order of the first two steps, the latch (bridge.process_setup.stop_signals) and then the
import of policy_server.main, whose imports take about a second; a SIGTERM in that second used
to end the process with the default action (exit -15). ``python -m policy_server.main`` does the
same at the top of that module.

Must not: import anything heavy at module level.
"""

from __future__ import annotations

from bridge.process_setup import stop_signals


def main() -> int:
    stop_signals.catch()
    stop_signals.checkpoint("entry")
    from policy_server.main import main as program

    return program()
