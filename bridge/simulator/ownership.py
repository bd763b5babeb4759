"""Per-event field ownership, as NRI's adaptation tracks it
(docs/protocol.md#ownership-and-conflicts).

Every field a plugin sets is claimed for (container id, Field[, key]) with the
owner string "NN-name". A second claim is a conflict, even by the same plugin
in the same response. A clear writes the owner "-NN-name"; after that only
that plugin may claim the entry again. Hooks are not exclusive: owners
accumulate as "NN-a,NN-b". Ownership lives for one event only.

Sans-IO: no asyncio, no sockets.
"""

from __future__ import annotations

from bridge.proto.nri import api_pb2 as api


class MergeError(Exception):
    """Plugin responses cannot be combined; the operation fails, no plugin is closed."""


def nri_field_name(field: int) -> str:
    try:
        return str(api.Field.Name(field))
    except ValueError:
        return f"Field({field})"


class Ownership:
    """Claims of one event: (container id, field, key or None) -> owner string."""

    def __init__(self) -> None:
        self._owners: dict[tuple[str, int, str | None], str] = {}

    def claim(self, container_id: str, field: int, plugin: str, key: str | None = None) -> None:
        """Record `plugin` as owner; raises MergeError on a conflicting earlier claim."""
        slot = (container_id, field, key)
        other = self._owners.get(slot)
        if other is not None and not (other.startswith("-") and other[1:] == plugin):
            what = nri_field_name(field) if key is None else f"{nri_field_name(field)} {key}"
            raise MergeError(f'plugins "{other}" and "{plugin}" both tried to set {what}')
        self._owners[slot] = plugin

    def clear(self, container_id: str, field: int, plugin: str, key: str | None = None) -> None:
        """Mark the entry as cleared by `plugin` (owner "-plugin")."""
        self._owners[(container_id, field, key)] = "-" + plugin

    def accumulate(self, container_id: str, field: int, plugin: str) -> None:
        """Non-exclusive ownership (hooks): owners join as "NN-a,NN-b"."""
        slot = (container_id, field, None)
        current = self._owners.get(slot)
        self._owners[slot] = plugin if not current else f"{current},{plugin}"

    def owner(self, container_id: str, field: int, key: str | None = None) -> str | None:
        return self._owners.get((container_id, field, key))

    def snapshot(self) -> dict[tuple[str, int, str | None], str]:
        return dict(self._owners)

    def restore(self, snapshot: dict[tuple[str, int, str | None], str]) -> None:
        self._owners = dict(snapshot)

    def to_proto(self) -> api.OwningPlugins:
        """The OwningPlugins message sent to validators (v0.10.0+)."""
        out = api.OwningPlugins()
        for (container_id, field, key), owner in sorted(
                self._owners.items(), key=lambda item: (item[0][0], item[0][1], item[0][2] or "")):
            owners = out.owners[container_id]
            if key is None:
                owners.simple[field] = owner
            else:
                owners.compound[field].owners[key] = owner
        return out
