"""What ValidateContainerAdjustment tells a validator besides the adjustment: who set what.

Owns ``Owners`` (NRI's ``OwningPlugins``: per container, the plugin that set each field, and for
fields with keys the plugin per key) and ``Plugin`` (a plugin connected to the runtime), frozen
values the request path builds from the request's ``owners`` and ``plugins``. A field is named as
NRI's ``Field`` enum names it (``"CPUShares"``, ``"MemLimit"``, ``"Env"``; the table is
``bridge.contract.owner_fields``); a plugin as the runtime names it, ``NN-name``
(``"10-webhook-bridge"``). Must not do I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from bridge.contract.owner_fields import FIELD_NAMES, FIELD_NUMBERS

_NONE: Mapping[str, Mapping[str, str]] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class FieldOwners:
    """One container's owners: ``simple`` field name -> plugin, ``compound`` field name -> key
    -> plugin (a key ``-NAME`` marks a removal; hooks, owned by all who added, read
    ``NN-a,NN-b``)."""

    simple: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    compound: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: _NONE)


@dataclass(frozen=True, slots=True)
class Owners:
    """Who set which field of which container (``OwningPlugins``), by container id."""

    containers: Mapping[str, FieldOwners] = field(default_factory=lambda: MappingProxyType({}))

    def owner(self, container_id: str, field_name: str, key: str | None = None) -> str | None:
        """The plugin (``NN-name``) that set ``field_name`` (``"CPUShares"``) of the container,
        or the ``key`` of a field with keys (``owner(cid, "Env", "HTTP_PROXY")``); ``None`` if
        no plugin did. Raises ``KeyError`` for a name that is no NRI field."""
        if field_name not in FIELD_NUMBERS:
            raise KeyError(f"{field_name!r} is no NRI field (known: {', '.join(FIELD_NUMBERS)})")
        owners = self.containers.get(container_id)
        if owners is None:
            return None
        if key is None:
            return owners.simple.get(field_name)
        return owners.compound.get(field_name, _EMPTY_KEYS).get(key)

    def fields_of(self, container_id: str, plugin: str) -> tuple[str, ...]:
        """The fields of the container ``plugin`` set (``"Env:HTTP_PROXY"`` for a key)."""
        owners = self.containers.get(container_id)
        if owners is None:
            return ()
        out = [name for name, who in owners.simple.items() if plugin in who.split(",")]
        out += [f"{name}:{key}" for name, keys in owners.compound.items()
                for key, who in keys.items() if plugin in who.split(",")]
        return tuple(out)


_EMPTY_KEYS: Mapping[str, str] = MappingProxyType({})
NO_OWNERS = Owners()


def field_name(number: int | str) -> str:
    """NRI's name for a ``Field`` number (``16`` -> ``"CPUShares"``); an unknown number (a newer
    NRI) stays a number, as text."""
    return FIELD_NAMES.get(int(number), str(number))


@dataclass(frozen=True, slots=True)
class Plugin:
    """A plugin connected to the runtime (``PluginInstance``); ``label`` is ``NN-name``, the
    form ``Owners`` uses."""

    name: str
    index: str = ""

    @property
    def label(self) -> str:
        return f"{self.index}-{self.name}" if self.index else self.name
