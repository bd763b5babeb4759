"""Checked reads of a manifest's fields: each returns the value or raises ManifestError.

Owns the small accessors every part of manifest reading shares (a mapping, a list, a string, a
string map, a list of named objects, a DNS name) and the two name grammars of the API server
(DNS label, DNS subdomain).
Must not: know what a field means (the modules reading documents, workloads, pods and
containers do).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from bridge.kube.manifest_error import ManifestError

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def object_name(obj: Mapping[str, Any], where: str, field: str = "metadata.name") -> str:
    """`metadata.name`, which must be a DNS subdomain name."""
    metadata = obj.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    if not isinstance(name, str) or not name:
        raise ManifestError(where, field, "missing")
    if not DNS_SUBDOMAIN.match(name) or len(name) > 253:
        raise ManifestError(where, field, f"{name!r} is not a DNS subdomain name")
    return name


def mapping(value: Any, where: str, field: str) -> Mapping[str, Any]:
    if value is None and field:
        raise ManifestError(where, field, "missing")
    if not isinstance(value, Mapping):
        raise ManifestError(where, field or "document", f"expected a mapping, got "
                            f"{type(value).__name__}")
    return value


def items(value: Any, where: str, field: str) -> list[Any]:
    """A list, or [] when the field is absent."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ManifestError(where, field, f"expected a list, got {type(value).__name__}")
    return value


def named_items(value: Any, where: str,
                field: str) -> Iterator[tuple[str, Mapping[str, Any], str]]:
    """Each entry of a list of named objects (``env``, ``volumes``): its non-empty ``name``, the
    entry, and the entry's field (``spec.volumes[2]``) for the caller's errors."""
    for i, item in enumerate(items(value, where, field)):
        at = f"{field}[{i}]"
        obj = mapping(item, where, at)
        name = obj.get("name")
        if not isinstance(name, str) or not name:
            raise ManifestError(where, f"{at}.name", "missing")
        yield name, obj, at


def string(value: Any, where: str, field: str) -> str:
    if not isinstance(value, str):
        raise ManifestError(where, field, f"expected a string, got {value!r}")
    return value


def string_map(value: Any, where: str, field: str) -> dict[str, str]:
    if value is None:
        return {}
    obj = mapping(value, where, field)
    out = {}
    for k, v in obj.items():
        if not isinstance(v, str):
            raise ManifestError(where, f"{field}.{k}", f"expected a string value, got {v!r}")
        out[str(k)] = v
    return out


def strings(value: Any, where: str, field: str) -> tuple[str, ...]:
    listed = items(value, where, field)
    for i, item in enumerate(listed):
        if not isinstance(item, str):
            raise ManifestError(where, f"{field}[{i}]", f"expected a string, got {item!r}")
    return tuple(listed)
