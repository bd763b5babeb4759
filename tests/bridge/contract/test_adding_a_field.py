"""Adding an adjustable NRI field: each declaration docs/architecture.md lists, checked.

The proto (schemas/nri/api.proto, `make proto`) is the field's shape; the declaration is its row
in bridge.contract.adjustment_fields (kind, ownership, removal, `since`), its NRI field id in
bridge.contract.field_table, its range or grammar in bridge.contract.value_rules where the type
does not say it, and its runtime facts (bridge.contract.runtime_effects, runtime_hazards) where
a runtime does anything but apply it from `since`. Everything else is derived (the reply models
and schemas, the bridge's checks, the SDK's limits, the capabilities); `undeclared` names what a
new proto field lacks, and fails on a table with one row taken out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import pytest

from bridge.contract import adjustment_fields, field_table, value_rules
from bridge.contract.adjustment_fields import FieldRule
from bridge.contract.runtime_effects import Route, Runtime, effect_of
from bridge.contract.schema import SCHEMA_DIR
from bridge.proto.nri import api_pb2 as api

# (message, its adjustment_fields table, its path, its name in the reply schema's $defs)
MESSAGES = ((api.ContainerAdjustment, "ADJUSTMENT_FIELDS", "", "Adjustment"),
            (api.LinuxContainerAdjustment, "LINUX_FIELDS", "linux.", "LinuxContainerAdjustment"),
            (api.LinuxResources, "RESOURCE_FIELDS", "linux.resources.", "LinuxResources"))


def undeclared(tables: Mapping[str, Mapping[str, FieldRule]]) -> list[str]:
    """The proto's adjustable fields some declaration misses, by what misses them."""
    found = []
    reply = json.loads((SCHEMA_DIR / "reply.schema.json").read_text())["$defs"]
    for message, table, prefix, name in MESSAGES:
        published = reply[name]["properties"]
        for fd in message.DESCRIPTOR.fields:
            path = prefix + fd.name
            if fd.name not in tables[table]:
                found.append(f"{path}: no row in adjustment_fields.{table}")
            elif fd.name not in ("linux", "resources") and not any(
                    leaf == path or leaf.startswith(path + ".") for leaf in field_table.LEAVES):
                found.append(f"{path}: no leaf in field_table (its NRI field id)")
            if fd.name not in published:
                found.append(f"{path}: not in the published reply schema (make the schemas)")
    return found


def test_every_adjustable_proto_field_is_declared() -> None:
    tables = {name: getattr(adjustment_fields, name) for _, name, _, _ in MESSAGES}
    assert undeclared(tables) == []


def test_a_field_without_its_row_is_named() -> None:
    tables = {name: dict(getattr(adjustment_fields, name)) for _, name, _, _ in MESSAGES}
    del tables["ADJUSTMENT_FIELDS"]["args"]
    del tables["RESOURCE_FIELDS"]["pids"]
    assert undeclared(tables) == ["args: no row in adjustment_fields.ADJUSTMENT_FIELDS",
                                  "linux.resources.pids: no row in adjustment_fields."
                                  "RESOURCE_FIELDS"]


@pytest.mark.parametrize("rule", value_rules.RULES, ids=lambda r: r.path)
def test_every_value_rule_sits_in_a_leaf(rule: value_rules.Rule) -> None:
    """A value rule names a leaf (or a field of a leaf's entries) the tables know, so a renamed
    or removed field cannot leave its rule behind unchecked."""
    plain = rule.path.split("[]", 1)[0]
    assert plain in field_table.LEAVES or any(
        plain.startswith(leaf + ".") for leaf in field_table.LEAVES), rule.path


def test_every_leaf_has_an_answer_for_every_route() -> None:
    """The runtime facts answer for every leaf (the default is "applied from `since`")."""
    for runtime in (Runtime("containerd", "2.2.7", (0, 12, 0)), Runtime("cri-o", "1.36.3", None)):
        for route in Route:
            for path in field_table.LEAVES:
                assert effect_of(path, route, runtime).effect is not None
