"""NRI's ``Field`` numbers by name: the keys of ValidateContainerAdjustment's ``owners``.

A validator request's ``owners.owners[container_id].simple`` maps a ``Field`` number (as a
string: JSON object keys) to the plugin that set it, ``compound`` a field with keys (env,
annotations, mounts, ...) to an owner per key (NRI ``pkg/api/owners.go``). Owns the name <->
number table, read from the proto's ``Field`` enum so it never drifts from schemas/nri/api.proto.
Must not do I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from bridge.proto.nri import api_pb2 as api

# "CPUShares" -> 16, "Env" -> 6, ... ("None", 0, is no field).
FIELD_NUMBERS: Mapping[str, int] = MappingProxyType({
    value.name: value.number for value in api.Field.DESCRIPTOR.values if value.number
})
FIELD_NAMES: Mapping[int, str] = MappingProxyType({n: name for name, n in FIELD_NUMBERS.items()})
