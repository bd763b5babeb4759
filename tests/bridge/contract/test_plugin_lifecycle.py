"""The one plugin lifecycle table (bridge.contract.plugin_lifecycle), and that the plugin's
session and the simulated runtime's plugin connection both follow it."""

from __future__ import annotations

import pytest

from bridge.contract.plugin_lifecycle import (
    TRANSITIONS,
    Lifecycle,
    LifecycleError,
    Phase,
    Step,
)
from bridge.nri import session
from bridge.simulator import connection

ORDER = [Step.REGISTER_PLUGIN, Step.CONFIGURE, Step.SYNCHRONIZE]


def test_the_protocol_order_and_close_from_anywhere() -> None:
    life = Lifecycle("test")
    assert [life.advance(step) for step in ORDER] == [
        Phase.REGISTERED, Phase.CONFIGURED, Phase.SYNCHRONIZED]
    assert life.advance(Step.CLOSE) is Phase.CLOSED and life.closed
    for taken in range(len(ORDER) + 1):
        life = Lifecycle("test")
        for step in ORDER[:taken]:
            life.advance(step)
        assert life.advance(Step.CLOSE) is Phase.CLOSED


@pytest.mark.parametrize("phase", list(Phase))
def test_every_step_out_of_order_is_refused(phase: Phase) -> None:
    for step in Step:
        life = Lifecycle("session")
        life.phase = phase
        if (phase, step) in TRANSITIONS:
            continue
        with pytest.raises(LifecycleError, match=f"session cannot take {step.value} when "
                                                 f"{phase.value}"):
            life.advance(step)
        assert life.phase is phase  # a refused step changes nothing


def test_both_ends_use_the_one_table() -> None:
    """Neither end keeps a table of its own: the modules that used to hold one name the
    contract's instead."""
    for module in (session, connection):
        assert not hasattr(module, "_TRANSITIONS")
        assert module.Lifecycle is Lifecycle
