"""Apply the entries to a TOML file's text, keeping everything else as it was.

Owns: reading a file's text (refused with line and column when it is not TOML: tomllib, the
standard library's strict parser, is the judge), editing keys in tables that exist in place
with tomlkit (which keeps comments, order and layout), appending the tables that do not exist
as new `[table]` sections at the end (valid TOML wherever their parents were defined), and the
check that the result parses to the original plus exactly the entries. Keys with an NRI
setting's name found in other tables are reported (the runtime ignores them there: the usual
mistake is a timeout written under the CRI plugin's table).

Must not: choose values or key names (nri_settings.py, runtime_tables.py) or touch the disk.
"""

from __future__ import annotations

import copy
import re
import textwrap
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import tomlkit
from tomlkit.exceptions import TOMLKitError
from tomlkit.items import Item, Table, Whitespace

from bridge.runtime_config.nri_settings import Entry, Value
from bridge.runtime_config.runtime_tables import ConfigTarget, RuntimeConfigError, dotted

_POSITION = re.compile(r"^(?P<msg>.*) \(at line (?P<line>\d+), column (?P<col>\d+)\)$")
INDENT = "  "
WIDTH = 92


@dataclass(frozen=True, slots=True)
class Change:
    """The new text, what changed (one line per key) and what looks misplaced."""

    text: str
    changed: tuple[str, ...]
    warnings: tuple[str, ...]


def read(text: str, source: str) -> dict[str, Any]:
    """The file as data; RuntimeConfigError `source:line:col: reason` when it is not TOML."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = _POSITION.match(str(exc))
        if match is None:
            raise RuntimeConfigError(f"{source}: not TOML: {exc}") from None
        raise RuntimeConfigError(f"{source}:{match['line']}:{match['col']}: not TOML: "
                                 f"{match['msg']}") from None


def config_version(data: Mapping[str, Any], source: str) -> int | None:
    """containerd's `version = N` (None for a file that says nothing at all: a new one)."""
    if not data:
        return None
    version = data.get("version")
    if version is None:
        raise RuntimeConfigError(f"{source}: version: missing; containerd reads such a file as "
                                 "config format 1, which this command does not write (run "
                                 "`containerd config migrate`, or add `version = 2`)")
    if not isinstance(version, int) or isinstance(version, bool):
        raise RuntimeConfigError(f"{source}: version: {version!r} is not an integer")
    return version


def _table_at(data: Mapping[str, Any], path: tuple[str, ...], source: str,
              literal: bool) -> Mapping[str, Any] | None:
    """The table at `path` (None: not there); a value in the way is refused by its name."""
    node: Any = data
    for depth, part in enumerate(path, 1):
        if part not in node:
            return None
        node = node[part]
        if not isinstance(node, Mapping):
            raise RuntimeConfigError(f"{source}: {dotted(path[:depth], literal)}: is a value, "
                                     f"not a table (the change needs [{dotted(path, literal)}])")
    return cast(Mapping[str, Any], node)


def _toml(value: Value) -> str:
    return tomlkit.item(value).as_string()


def _comment_lines(text: str, indent: str) -> list[str]:
    return [f"{indent}# {line}" for line in textwrap.wrap(text, WIDTH - len(indent) - 2)]


def _table_text(table: tuple[str, ...], items: Sequence[Entry], literal: bool) -> str:
    lines = [f"[{dotted(table, literal)}]"]
    for entry in items:
        lines += _comment_lines(entry.comment, INDENT)
        lines.append(f"{INDENT}{entry.key} = {_toml(entry.value)}")
    return "\n".join(lines) + "\n"


def _tomlkit_table(doc: tomlkit.TOMLDocument, path: Sequence[str]) -> Any:
    node: Any = doc
    for part in path:
        node = node[part]
    return node


def _add_keys(table: Any, items: Sequence[Entry]) -> None:
    """Add keys to an existing table after its last key, indented like it, each with its
    comment; a blank line that ended the table still ends it."""
    body: list[tuple[Any, Item]] = table.value.body if isinstance(table, Table) else []
    trailing: list[tuple[Any, Item]] = []
    while body and body[-1][0] is None and isinstance(body[-1][1], Whitespace):
        trailing.insert(0, body.pop())
    keyed = [item for key, item in body if key is not None and not isinstance(item, Table)]
    indent = keyed[-1].trivia.indent if keyed else ""
    for entry in items:
        for line in _comment_lines(entry.comment, indent):
            table.add(tomlkit.comment(line.strip()[2:]).indent(len(indent)))
        table.add(entry.key, tomlkit.item(entry.value).indent(len(indent)))
    body.extend(trailing)


def _misplaced(data: Mapping[str, Any], target: ConfigTarget) -> Iterator[str]:
    """Keys named as an NRI setting but outside the NRI tables."""
    names = {k for k, _ in target.keys.values()} | {k for k, _ in target.validator_keys.values()}
    own = {target.table, target.validator_table}

    def walk(node: Mapping[str, Any], path: tuple[str, ...]) -> Iterator[str]:
        for key, value in node.items():
            if isinstance(value, Mapping):
                yield from walk(value, (*path, key))
            elif key in names and path not in own:
                where = dotted(path, target.literal_keys) if path else "the top level"
                yield (f"{dotted((*path, key), target.literal_keys)}: an NRI setting's name in "
                       f"{where}, where {target.name()} ignores it; it reads it from "
                       f"[{dotted(target.table, target.literal_keys)}]")

    yield from walk(data, ())


def _describe(table: tuple[str, ...], entry: Entry, old: Any, literal: bool) -> str:
    key = dotted((*table, entry.key), literal)
    if old is None:
        return f"{key} = {_toml(entry.value)} (added)"
    return f"{key} = {_toml(entry.value)} (was {_toml(old)})"


def set_entries(text: str, source: str, target: ConfigTarget, entries: Sequence[Entry],
          header: Sequence[str] = ()) -> Change:
    """The text with every entry set. `header` comment lines open a new (empty) file."""
    data = read(text, source)
    expected = copy.deepcopy(data)
    try:
        return _apply(text, data, expected, source, target, entries, header)
    except TOMLKitError as exc:  # tomllib read it, tomlkit cannot edit it
        raise RuntimeConfigError(f"{source}: the change cannot be merged into this file "
                                 f"({exc})") from None


def _implicit(doc: tomlkit.TOMLDocument, path: Sequence[str]) -> bool:
    table = _tomlkit_table(doc, path)
    return isinstance(table, Table) and table.is_super_table()


def _apply(text: str, data: dict[str, Any], expected: dict[str, Any], source: str,
           target: ConfigTarget, entries: Sequence[Entry], header: Sequence[str]) -> Change:
    doc = tomlkit.parse(text)
    changed: list[str] = []
    new_tables: dict[tuple[str, ...], list[Entry]] = {}
    added: dict[tuple[str, ...], list[Entry]] = {}
    for entry in entries:
        current = _table_at(data, entry.table, source, target.literal_keys)
        old = current.get(entry.key) if current is not None else None
        node = expected
        for part in entry.table:
            node = node.setdefault(part, {})
        node[entry.key] = entry.value
        if old == entry.value and type(old) is type(entry.value):
            continue
        changed.append(_describe(entry.table, entry, old, target.literal_keys))
        if current is None or _implicit(doc, entry.table):
            # Not there, or there only as the parent of a [sub.table]: a [table] of its own.
            new_tables.setdefault(entry.table, []).append(entry)
        elif old is None:
            added.setdefault(entry.table, []).append(entry)
        else:
            _tomlkit_table(doc, entry.table)[entry.key] = entry.value
    for table, items in added.items():
        _add_keys(_tomlkit_table(doc, table), items)
    out = tomlkit.dumps(doc)
    if not data and new_tables:
        # A new file (or one of comments only): the header if it is empty, and the format.
        opening = [] if out.strip() else [f"# {line}" if line else "#" for line in header]
        if target.config_version is not None:
            opening.append(f"version = {target.config_version}")
            expected["version"] = target.config_version
        kept = out.rstrip("\n") + "\n\n" if out.strip() else ""
        out = kept + "\n".join(opening) + "\n"
    for table, items in new_tables.items():
        out = out.rstrip("\n") + "\n\n" + _table_text(table, items, target.literal_keys)
    out = out.lstrip("\n")
    _check(out, expected, source)
    return Change(out, tuple(changed), tuple(_misplaced(data, target)))


def _check(out: str, expected: Mapping[str, Any], source: str) -> None:
    """The result must parse to the original with exactly the entries set (a table written
    inline, `x = {...}`, cannot take a new [x.sub] section, for instance)."""
    try:
        result = tomllib.loads(out)
    except tomllib.TOMLDecodeError as exc:
        raise RuntimeConfigError(f"{source}: the change cannot be merged into this file "
                                 f"({exc}); is the NRI table written inline?") from None
    if result != expected:
        raise RuntimeConfigError(f"{source}: the change cannot be merged into this file without "
                                 "changing other settings; is the NRI table written inline?")


__all__ = ["Change", "config_version", "read", "set_entries"]
