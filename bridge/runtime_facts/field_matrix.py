"""docs/webhooks.md's capability tables, rendered from the one field table for every profile.

One table per route (an adjustment, an UpdateContainer reply, a plugin's UpdateContainers, the
bridge's unsolicited update as CRI UpdateContainerResources), a row per leaf
(bridge.contract.field_table), a column per runtime profile (bridge.runtime_facts.profiles),
each cell what that runtime does (bridge.contract.runtime_effects); then every fact with its
source. tests/bridge/runtime_facts/test_field_table.py checks the docs against `render()`;
`python -m bridge.runtime_facts.field_matrix` prints it.

Owns: the rendering. Must not: state a fact of its own.
"""

from __future__ import annotations

from bridge.contract.field_table import LEAVES
from bridge.contract.nri_version import format_version
from bridge.contract.runtime_effects import FACTS, ROUTE_PHRASES, Effect, Route, effect_of
from bridge.runtime_facts.profiles import PROFILES

OLDEST_NRI = (0, 3, 0)  # the oldest NRI a runtime ships (containerd 1.7.0): "since always"
BEGIN = "<!-- field-table:begin (generated: python -m bridge.runtime_facts.field_matrix) -->"
END = "<!-- field-table:end -->"
CELLS = {Effect.APPLIED: "✓", Effect.IGNORED: "ignored", Effect.SWAP_IS_LIMIT: "✓ swap = limit",
         Effect.REMOVAL_LOST: "✓ removal lost", Effect.CRASHES: "crash", Effect.ABSENT: ""}


def render() -> str:
    profiles = list(PROFILES.values())
    head = "| leaf | since | " + " | ".join(p.key for p in profiles) + " |"
    rule = "|---|---|" + "---|" * len(profiles)
    out = [BEGIN, ""]
    for route in Route:
        out += [f"**{ROUTE_PHRASES[route][0].upper()}{ROUTE_PHRASES[route][1:]}** "
                f"(`{route.value}`)", "", head, rule]
        for leaf in LEAVES.values():
            if route is not Route.ADJUST and not leaf.in_update:
                continue
            cells = [CELLS[effect_of(leaf.path, route, p.runtime).effect] for p in profiles]
            since = format_version(max(leaf.since, OLDEST_NRI))
            out.append(f"| `{leaf.path}` | {since} | "
                       + " | ".join(cells) + " |")
        out.append("")
    out += ["Sources of the exceptions (every other cell: applied when the runtime's NRI has "
            "the leaf):", ""]
    for fact in FACTS:
        routes = ", ".join(r.value for r in Route if r in fact.routes)
        families = "/".join(sorted(fact.families))
        leaves = ", ".join(f"`{p.removeprefix('linux.resources.')}`" for p in fact.leaves)
        out.append(f"- {leaves}: {fact.effect.value} ({routes}; {families}) — "
                   f"*{fact.source}*: {fact.why}")
    out += ["", END]
    return "\n".join(out)


if __name__ == "__main__":
    print(render())
