"""A runtime simulator: plays containerd's side of NRI over a real Unix socket.

    rt = SimulatedRuntime(path, PROFILES["containerd-2.1.9"], request_timeout_s=2.0)
    await rt.start()
    conn = await rt.wait_plugin(timeout_s=10)
    result = await rt.create_container(pod, container)
    await rt.stop()

Tests, the demo and the benchmarks drive plugins through it.
"""

from bridge.runtime_facts.profiles import DEFAULT_PROFILE, PROFILES, RuntimeProfile
from bridge.simulator.bench import BenchResult, run_bench
from bridge.simulator.delivery import EventResult
from bridge.simulator.runtime import SimulatedRuntime
from bridge.simulator.scenario import Scenario, ScenarioError, load_scenario, run_scenario
from bridge.simulator.simulator_error import SimulatorError

__all__ = [
    "DEFAULT_PROFILE",
    "PROFILES",
    "BenchResult",
    "EventResult",
    "RuntimeProfile",
    "Scenario",
    "ScenarioError",
    "SimulatedRuntime",
    "SimulatorError",
    "load_scenario",
    "run_bench",
    "run_scenario",
]
