"""The SDK is complete and is the package's face: every type an exported type's fields use is
exported too, and ``policy_server`` re-exports exactly ``policy_server.sdk``."""

from __future__ import annotations

import dataclasses
import enum
import types
import typing

import policy_server
import policy_server.sdk as sdk

# Types a field may use without the SDK exporting them: builtins and the standard library.
_STDLIB_MODULES = {"builtins", "typing", "collections.abc", "enum", "types"}


def _exported_classes() -> dict[str, type]:
    return {name: obj for name in sdk.__all__ if isinstance(obj := getattr(sdk, name), type)}


def _leaf_types(annotation: object) -> set[type]:
    """The classes named anywhere in a resolved annotation (``tuple[Device, ...] | None``)."""
    found: set[type] = set()
    stack = [annotation]
    while stack:
        item = stack.pop()
        origin = typing.get_origin(item)
        if origin is not None:
            if origin not in (typing.Union, types.UnionType, typing.Literal):
                stack.append(origin)
            if origin is not typing.Literal:
                stack.extend(typing.get_args(item))
        elif isinstance(item, type):
            found.add(item)
    return found


def _field_types(cls: type) -> dict[str, set[type]]:
    hints = typing.get_type_hints(cls)
    return {f.name: _leaf_types(hints[f.name]) for f in dataclasses.fields(cls)}


def test_package_face_is_exactly_the_sdk() -> None:
    assert sorted(policy_server.__all__) == sorted(sdk.__all__)
    for name in sdk.__all__:
        assert getattr(policy_server, name) is getattr(sdk, name), name


def test_every_type_an_exported_dataclass_uses_is_exported() -> None:
    exported = set(_exported_classes().values())
    missing: list[str] = []
    checked = 0
    for name, cls in _exported_classes().items():
        if not dataclasses.is_dataclass(cls):
            continue
        for field_name, used in _field_types(cls).items():
            checked += 1
            for typ in used:
                if typ.__module__ in _STDLIB_MODULES or typ in exported:
                    continue
                missing.append(f"{name}.{field_name}: {typ.__module__}.{typ.__qualname__}")
    assert checked > 50  # the walk really visited the SDK's fields
    assert not missing, "SDK types use types the SDK does not export:\n" + "\n".join(missing)


class _Hidden:
    pass


@dataclasses.dataclass
class _Uses:
    value: tuple[_Hidden, ...] | None
    device: sdk.Device


def test_the_walk_notices_an_unexported_type() -> None:
    used = _field_types(_Uses)
    assert used["value"] == {_Hidden, tuple, type(None)}
    assert _Hidden not in set(_exported_classes().values())
    assert used["device"] == {sdk.Device}


def test_enums_and_event_names_are_exported() -> None:
    for name in ("EventName", "FailurePolicy", "HookStage", "Payload"):
        assert issubclass(getattr(sdk, name), enum.Enum)
