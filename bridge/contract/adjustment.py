"""ContainerAdjustment in webhook JSON: explicit removals instead of `-` key prefixes.

NRI marks a removal by prefixing the key with "-" (protocol §7.1). Policy
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

from bridge.contract.convert import ConversionError, fill, to_json
from bridge.proto.nri import api_pb2 as api

E = TypeVar("E", bound=Message)

# remove.<kind> -> where NRI carries the marker
REMOVABLE = ("annotations", "mounts", "env", "devices", "namespaces", "sysctl", "net_devices")


def adjustment_from_json(data: Any, path: str = "adjust") -> api.ContainerAdjustment:
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


def _mark(adjust: api.ContainerAdjustment, kind: str, name: str) -> None:
    marked = "-" + name
    if kind == "annotations":
        adjust.annotations[marked] = ""
    elif kind == "mounts":
        adjust.mounts.add(destination=marked)
    elif kind == "env":
        adjust.env.add(key=marked)
    elif kind == "devices":
        adjust.linux.devices.add(path=marked)
    elif kind == "namespaces":
        adjust.linux.namespaces.add(type=marked)
    elif kind == "sysctl":
        adjust.linux.sysctl[marked] = ""
    elif kind == "net_devices":
        adjust.linux.net_devices[marked].SetInParent()


def _keys(adjust: api.ContainerAdjustment) -> dict[str, list[str]]:
    linux = adjust.linux
    return {
        "annotations": list(adjust.annotations),
        "mounts": [m.destination for m in adjust.mounts],
        "env": [e.key for e in adjust.env],
        "devices": [d.path for d in linux.devices],
        "namespaces": [n.type for n in linux.namespaces],
        "sysctl": list(linux.sysctl),
        "net_devices": list(linux.net_devices),
    }


def _refuse_markers(adjust: api.ContainerAdjustment, path: str) -> None:
    for kind, keys in _keys(adjust).items():
        for key in keys:
            if key.startswith("-"):
                raise ConversionError(f"{path}.{kind}", f"key {key!r} starts with '-'; "
                                      f"removals go in {path}.remove.{kind}")


def adjustment_to_json(adjust: api.ContainerAdjustment) -> dict[str, Any]:
    """The inverse: marked entries become `remove`, everything else stays."""
    remove = {kind: [k[1:] for k in keys if k.startswith("-")]
              for kind, keys in _keys(adjust).items()}
    remove = {kind: names for kind, names in remove.items() if names}
    if not remove:
        return to_json(adjust)
    clean = api.ContainerAdjustment()
    clean.CopyFrom(adjust)
    linux = clean.linux
    for table in (clean.annotations, linux.sysctl, linux.net_devices):
        for key in [k for k in table if k.startswith("-")]:
            del table[key]
    _drop_marked(clean.mounts, "destination")
    _drop_marked(clean.env, "key")
    _drop_marked(linux.devices, "path")
    _drop_marked(linux.namespaces, "type")
    data = to_json(clean)
    data["remove"] = remove
    return data


def _drop_marked(items: RepeatedCompositeFieldContainer[E], attr: str) -> None:
    """Remove the entries whose `attr` carries NRI's "-" removal marker."""
    kept = [item for item in items if not getattr(item, attr).startswith("-")]
    del items[:]
    items.extend(kept)
