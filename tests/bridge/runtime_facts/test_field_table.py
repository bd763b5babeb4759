"""The one NRI field table (issue 33): leaves, what each runtime does with them per route, the
consumers that read it (capabilities, the dropped-field check, the simulator's apply), and the
docs' capability tables generated from it."""

from __future__ import annotations

from pathlib import Path

from bridge.contract.applied_view import as_applied, set_leaves
from bridge.contract.capabilities import capabilities, connected
from bridge.contract.cri_service import CARRIED
from bridge.contract.field_table import LEAVES, RESOURCES, UPDATE_LEAVES
from bridge.contract.runtime_effects import Effect, Route, Runtime, effect_of
from bridge.proto.nri import api_pb2 as api
from bridge.runtime_facts.apply import apply_adjustment
from bridge.runtime_facts.field_matrix import BEGIN, END, render
from bridge.runtime_facts.profiles import PROFILES
from bridge.simulator.state import RuntimeState

DOCS = Path(__file__).resolve().parents[3] / "docs" / "webhooks.md"
CONTAINERD_2_1 = PROFILES["containerd-2.1.9"].runtime
CONTAINERD_2_3 = PROFILES["containerd-2.3.4"].runtime
CRIO = PROFILES["cri-o-1.36.3"].runtime
GI = 1 << 30


def test_every_leaf_has_an_nri_field_id_where_nri_names_one() -> None:
    assert LEAVES[RESOURCES + "memory.swappiness"].field_id == api.Field.MemSwappiness
    assert LEAVES["linux.sysctl"].field_id == api.Field.Sysctl
    assert LEAVES["rlimits"].since == (0, 4, 0)  # item 4: not "any version"
    assert {leaf.path.removeprefix(RESOURCES) for leaf in UPDATE_LEAVES} >= CARRIED


def test_the_docs_tables_are_the_table() -> None:
    text = DOCS.read_text()
    generated = text[text.index(BEGIN):text.index(END) + len(END)]
    assert generated == render(), "regenerate: python -m bridge.runtime_facts.field_matrix"


def test_an_adjustment_s_memory_is_only_its_limit_and_swap_follows() -> None:
    adjust = api.ContainerAdjustment()
    adjust.linux.resources.memory.limit.value = GI
    adjust.linux.resources.memory.swappiness.value = 10
    view = as_applied(adjust, Route.ADJUST, CONTAINERD_2_1)
    assert [n.text for n in view.notices] == [
        f"containerd 2.1.9 sets memory.swap to memory.limit ({GI}) from an adjustment",
        "containerd 2.1.9 ignores memory.swappiness in an adjustment"]
    created = apply_adjustment(api.Container(id="c"), adjust, CONTAINERD_2_1)
    memory = created.linux.resources.memory
    assert memory.limit.value == memory.swap.value == GI and not memory.HasField("swappiness")
    runtime = connected(CONTAINERD_2_1.name, CONTAINERD_2_1.version, CONTAINERD_2_1.nri)
    assert runtime.dropped(set_leaves(adjust), ()) == [RESOURCES + "memory.swappiness"]
    caps = capabilities((0, 8, 0), "containerd", "2.1.9")
    assert caps is not None and RESOURCES + "memory.limit" in caps
    assert RESOURCES + "memory.swappiness" not in caps


def test_a_lone_sysctl_removal_is_lost_until_after_v0_12_2() -> None:
    adjust = api.ContainerAdjustment()
    adjust.linux.sysctl["-net.core.somaxconn"] = ""
    container = api.Container(id="c", annotations={"net.core.somaxconn": "x", "keep": "1"})
    container.linux.sysctl["net.core.somaxconn"] = "1024"
    after = apply_adjustment(container, adjust, CONTAINERD_2_3)
    assert dict(after.linux.sysctl) == {"net.core.somaxconn": "1024"}  # the sysctl stays
    assert dict(after.annotations) == {"keep": "1"}  # the annotation of that name goes
    fixed = Runtime("containerd", "2.4.0", (0, 12, 3))
    assert dict(apply_adjustment(container, adjust, fixed).linux.sysctl) == {}
    assert effect_of("linux.sysctl", Route.ADJUST, PROFILES["containerd-2.2.7"].runtime).effect \
        is Effect.CRASHES  # the hazard row (bridge/contract/runtime_hazards.py) comes first


def test_updates_keep_what_toCRIResources_keeps_and_cri_o_keeps_more_unsolicited() -> None:
    update = api.ContainerUpdate(container_id="c")
    update.linux.resources.memory.limit.value = 2 * GI
    update.linux.resources.memory.reservation.value = GI
    update.linux.resources.memory.swap.value = 4 * GI
    update.linux.resources.cpu.shares.value = 1000
    update.linux.resources.pids.limit = 100
    kept: dict[tuple[str, Route], api.LinuxResources] = {}
    for name, runtime in (("containerd", CONTAINERD_2_1), ("cri-o", CRIO)):
        for route in (Route.UPDATE, Route.UPDATE_CONTAINERS, Route.CRI_UPDATE):
            state = RuntimeState(runtime)
            before = api.Container(id="c", state=api.CONTAINER_RUNNING)
            before.linux.resources.memory.swap.value = 3 * GI
            state.seed([], [before])
            assert state.apply_update(update, route)
            kept[(name, route)] = state.containers["c"].linux.resources
    for (name, route), res in kept.items():
        assert res.memory.limit.value == 2 * GI and res.cpu.shares.value == 1000, (name, route)
        unsolicited_crio = (name, route) == ("cri-o", Route.UPDATE_CONTAINERS)
        assert res.HasField("pids") is unsolicited_crio, (name, route)
        assert res.memory.HasField("reservation") is unsolicited_crio, (name, route)
        # containerd: swap = the new limit; CRI-O: swap left at its old value.
        assert res.memory.swap.value == (2 * GI if name == "containerd" else 3 * GI), (name, route)


def test_the_cri_route_is_what_cri_carries_and_the_runtime_keeps() -> None:
    for leaf in UPDATE_LEAVES:
        verdict = effect_of(leaf.path, Route.CRI_UPDATE, CONTAINERD_2_1)
        if leaf.path.removeprefix(RESOURCES) not in CARRIED:
            assert verdict.effect is Effect.IGNORED, leaf.path
        elif leaf.path != RESOURCES + "memory.swap":
            assert verdict == effect_of(leaf.path, Route.UPDATE, CONTAINERD_2_1), leaf.path
    # CRI carries swap, and containerd keeps the request when no plugin updates the container
    # (lab: tests/e2e/test_field_differential.py); an UpdateContainer reply cannot set it.
    assert effect_of(RESOURCES + "memory.swap", Route.CRI_UPDATE, CONTAINERD_2_1).effect \
        is Effect.APPLIED


def test_the_sdk_s_resource_scalars_are_the_table_s() -> None:
    """Every scalar leaf of LinuxResources is typed in the SDK's ResourcePatch, and nothing
    else: a leaf added to the table without the SDK (or the other way round) fails here."""
    from policy_server.sdk.resource_patch import SCALAR_PATHS

    # The table's leaf is `pids` (LinuxPids has one field); the SDK types its `limit`.
    sdk = {RESOURCES + ".".join(path).removesuffix(".limit") if path[0] == "pids"
           else RESOURCES + ".".join(path) for path in SCALAR_PATHS.values()}
    repeated = {RESOURCES + name for name in ("hugepage_limits", "unified", "devices")}
    assert sdk == {p for p in LEAVES if p.startswith(RESOURCES)} - repeated


def test_containerd_2_4_and_cri_o_1_37_rows() -> None:
    """containerd 2.4.0-beta.0 (NRI v0.12.1) still loses a lone sysctl removal, 2.4.0 GA (v0.12.3)
    applies it; both take a plugin's UpdateContainers as the bridge's unsolicited route; CRI-O
    1.37 (v0.12.0) no longer crashes on an added sysctl, knows memory_policy, and stays on CRI."""
    beta, ga = PROFILES["containerd-2.4.0-beta.0"].runtime, PROFILES["containerd-2.4.0"].runtime
    crio_1_37 = PROFILES["cri-o-1.37.0"].runtime
    assert effect_of("linux.sysctl", Route.ADJUST, beta).effect is Effect.REMOVAL_LOST
    assert effect_of("linux.sysctl", Route.ADJUST, ga).effect is Effect.APPLIED
    assert effect_of("linux.sysctl", Route.ADJUST, crio_1_37).effect is Effect.REMOVAL_LOST
    assert effect_of("linux.sysctl", Route.ADJUST, CRIO).effect is Effect.CRASHES
    assert effect_of("linux.memory_policy", Route.ADJUST, crio_1_37).effect is Effect.APPLIED
    assert effect_of("linux.memory_policy", Route.ADJUST, CRIO).effect is Effect.IGNORED
    assert beta.unsolicited is ga.unsolicited is Route.UPDATE_CONTAINERS
    assert CONTAINERD_2_3.unsolicited is crio_1_37.unsolicited is Route.CRI_UPDATE
    assert beta.label == "containerd 2.4.0-beta.0"
    head = next(line for line in render().splitlines() if line.startswith("| leaf |"))
    assert "| containerd-2.3.4 | containerd-2.4.0-beta.0 | containerd-2.4.0 |" in head
    assert "| cri-o-1.36.3 | cri-o-1.37.0 |" in head
