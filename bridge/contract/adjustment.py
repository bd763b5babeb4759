"""ContainerAdjustment in webhook JSON: explicit removals instead of `-` key prefixes.

NRI marks a removal by prefixing the key with "-" (docs/protocol.md#removals). Policy
authors never see that: they write

    "adjust": {"env": [...], "remove": {"env": ["HTTP_PROXY"], "mounts": ["/data"]}}

and this module turns it into the marked entries, and back. A key that already
starts with "-" in the positive part is refused, so a policy cannot smuggle a
removal past the allow list.
"""

from __future__ import annotations

from typing import Any, TypeVar

from google.protobuf.internal.containers import RepeatedCompositeFieldContainer
from google.protobuf.message import Message

from bridge.contract.adjustment_fields import ADJUSTMENT_FIELDS, Owner
from bridge.contract.adjustment_fields import REMOVABLE as REMOVABLE_FIELDS
from bridge.contract.convert import ConversionError, fill, to_json
from bridge.proto.nri import api_pb2 as api

E = TypeVar("E", bound=Message)

# remove.<field>: the fields NRI's "-" marker can remove (bridge.contract.adjustment_fields).
REMOVABLE = tuple(REMOVABLE_FIELDS)


def nri_adjustment_from_json(data: Any, path: str = "adjust") -> api.ContainerAdjustment:
    if not isinstance(data, dict):
        raise ConversionError(path, "expected an object")
    body = dict(data)
    remove = body.pop("remove", None) or {}
    adjust = api.ContainerAdjustment()
    fill(adjust, body, path)
    _refuse_markers(adjust, path)
    if not isinstance(remove, dict):
        raise ConversionError(f"{path}.remove", "expected an object")
    for kind, names in remove.items():
        where = f"{path}.remove.{kind}"
        if kind not in REMOVABLE:
            raise ConversionError(where, f"cannot remove {kind} "
                                  f"(removable: {', '.join(REMOVABLE)})")
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise ConversionError(where, "expected a list of non-empty strings")
        for name in names:
            _mark(adjust, kind, name)
    return adjust


def _parent(adjust: api.ContainerAdjustment, name: str) -> Message:
    """The message that holds removable field `name`: the adjustment or its `linux` part."""
    return adjust if name in ADJUSTMENT_FIELDS else adjust.linux


def _mark(adjust: api.ContainerAdjustment, name: str, key: str) -> None:
    marked = "-" + key
    rule = REMOVABLE_FIELDS[name]
    field = getattr(_parent(adjust, name), name)
    if rule.owner is Owner.ENTRY:
        field.add(**{rule.key: marked})
    elif isinstance(field[marked], Message):  # map of messages (net_devices)
        field[marked].SetInParent()
    else:  # map of strings (annotations, sysctl)
        field[marked] = ""


def _keys(adjust: api.ContainerAdjustment) -> dict[str, list[str]]:
    """The keys of every removable field that is set (map keys, or the entries' identifying
    attribute). Only the fields present are read: a reply's adjustment sets few of them."""
    out: dict[str, list[str]] = {}
    top = {fd.name for fd, _ in adjust.ListFields()}
    linux = {fd.name for fd, _ in adjust.linux.ListFields()} if "linux" in top else set()
    for name, rule in REMOVABLE_FIELDS.items():
        if name not in (top if name in ADJUSTMENT_FIELDS else linux):
            continue
        field = getattr(_parent(adjust, name), name)
        out[name] = ([str(getattr(e, rule.key)) for e in field] if rule.owner is Owner.ENTRY
                     else list(field))
    return out


def _refuse_markers(adjust: api.ContainerAdjustment, path: str) -> None:
    for kind, keys in _keys(adjust).items():
        for key in keys:
            if key.startswith("-"):
                field = kind if kind in ADJUSTMENT_FIELDS else f"linux.{kind}"
                raise ConversionError(f"{path}.{field}", f"key {key!r} starts with '-'; "
                                      f"removals go in {path}.remove.{kind}")


def nri_adjustment_to_json(adjust: api.ContainerAdjustment) -> dict[str, Any]:
    """The inverse: marked entries become `remove`, everything else stays."""
    remove = {kind: [k[1:] for k in keys if k.startswith("-")]
              for kind, keys in _keys(adjust).items()}
    remove = {kind: names for kind, names in remove.items() if names}
    if not remove:
        return to_json(adjust)
    clean = api.ContainerAdjustment()
    clean.CopyFrom(adjust)
    for name, rule in REMOVABLE_FIELDS.items():
        field = getattr(_parent(clean, name), name)
        if rule.owner is Owner.ENTRY:
            _drop_marked(field, rule.key)
        else:
            for key in [k for k in field if k.startswith("-")]:
                del field[key]
    data = to_json(clean)
    data["remove"] = remove
    return data


def _drop_marked(items: RepeatedCompositeFieldContainer[E], attr: str) -> None:
    """Remove the entries whose `attr` carries NRI's "-" removal marker."""
    kept = [item for item in items if not getattr(item, attr).startswith("-")]
    del items[:]
    items.extend(kept)
