"""docs/architecture.md "Where to add things", checked entry by entry.

The file lists are read from the section itself (so a module that moves needs only the docs
updated): under **Names each** and **Regenerated** every listed file must name every runtime
profile, policy, event or request field of its kind, and (profiles, policies, events) a product
or docs file naming all of them must be listed somewhere in the entry. Each check is a function
of its inputs, and is shown failing on a fake extra profile, policy, event or field and on a
list with a file taken out.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from functools import cache
from pathlib import Path

import pytest

import policy_server.policies as policies_package
from bridge.contract.catalogue import EVENT_NAMES, EventName
from bridge.contract.nri_version import nri_version_of
from bridge.proto.nri import api_pb2
from bridge.runtime_facts.profiles import PROFILES
from policy_server.policies import CATALOGUE

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
KINDS = ("Names each", "Regenerated", "Where it differs")
# item -> the spellings a file may name it by
Spellings = Mapping[str, tuple[str, ...]]


def section(text: str) -> dict[str, dict[str, list[str]]]:
    """Entry title -> kind -> the paths listed (placeholders such as <Event> kept)."""
    start = text.index("\n## Where to add things\n")
    end = text.index("\n## ", start + 1)
    entries: dict[str, dict[str, list[str]]] = {}
    for block in text[start:end].split("\n### ")[1:]:
        title, _, body = block.partition("\n")
        lists: dict[str, list[str]] = {}
        for item in re.split(r"\n(?=- )", body):
            kind = next((k for k in KINDS if item.startswith(f"- {k}:")), None)
            if kind is not None:
                lists[kind] = [token for token in re.findall(r"`([^`\s]+)`", item)
                               if "/" in token or re.search(r"\.(md|py|pyi|json|proto)$", token)
                               or token == ".importlinter"]
        entries[title.strip()] = lists
    return entries


@cache
def entries() -> dict[str, dict[str, list[str]]]:
    return section(DOC.read_text())


def entry(title: str) -> dict[str, list[str]]:
    found = entries().get(title)
    assert found is not None, f"docs/architecture.md has no entry '### {title}'"
    assert found.get("Names each"), f"'{title}' lists no file under 'Names each'"
    return found


def expand(path: str, item: str) -> str:
    return re.sub(r"<[^>]+>", item, path)


def _names(text: str, spellings: tuple[str, ...]) -> bool:
    return any(re.search(rf"(?<![\w-]){re.escape(s)}(?![\w-])", text) for s in spellings)


def unnamed(lists: Mapping[str, list[str]], items: Spellings,
            read: Callable[[str], str | None]) -> list[str]:
    """'path: item' for each checked file that does not name an item (or does not exist)."""
    found = []
    for kind in ("Names each", "Regenerated"):
        for template in lists.get(kind, []):
            for item, spellings in items.items():
                path = expand(template, item)
                text = read(path)
                if text is None:
                    found.append(f"{path}: missing")
                elif not _names(text, spellings):
                    found.append(f"{path}: does not name {item}")
    return sorted(set(found))


def unlisted(lists: Mapping[str, list[str]], items: Spellings, files: Iterable[str],
             read: Callable[[str], str | None]) -> list[str]:
    """Product and docs files naming every item that the entry does not list."""
    listed = {expand(p, item) for paths in lists.values() for p in paths for item in items}
    return sorted(f for f in files if f not in listed
                  and all(_names(read(f) or "", s) for s in items.values()))


def read(path: str) -> str | None:
    file = ROOT / path
    try:
        return file.read_text()
    except (FileNotFoundError, IsADirectoryError, UnicodeDecodeError):
        return None


_SKIPPED_TOP = frozenset({"tests", "build", "dist"})


@cache
def repository_files() -> tuple[str, ...]:
    """The product and docs files (tests, recordings, build output and this doc aside), walked
    without git: a test here starts no process (tests/in_process.py). Skipped directories are
    not entered (.venv and .git alone hold more files than the repository)."""
    found: list[str] = []
    for top, dirs, files in os.walk(ROOT):
        rel = Path(top).relative_to(ROOT).parts
        dirs[:] = sorted(d for d in dirs if not _skipped_dir(d, top_level=not rel))
        found.extend("/".join((*rel, name)) for name in files
                     if name != ".git" and not name.endswith((".jsonl", ".pyc")))
    return tuple(sorted(f for f in found if f != "docs/architecture.md"))


def _skipped_dir(name: str, *, top_level: bool) -> bool:
    return ((top_level and name in _SKIPPED_TOP) or (name.startswith(".") and name != ".ci")
            or name in ("__pycache__", ".build") or name.endswith(".egg-info"))


def profiles() -> dict[str, tuple[str, ...]]:
    return {key: (key,) for key in PROFILES}


def policies() -> dict[str, tuple[str, ...]]:
    return {name: (f"`{name}`", f'"{name}"', f"# {name}", module)
            for name, module in CATALOGUE.items()}


def events() -> dict[str, tuple[str, ...]]:
    return {e.value: (e.value, e.name, f"{e.value}Request") for e in EventName}


GROUPS: dict[str, Callable[[], dict[str, tuple[str, ...]]]] = {
    "A runtime profile": profiles,
    "A policy": policies,
    "An event": events,
}


@pytest.mark.parametrize("title", GROUPS)
def test_every_listed_file_names_every_one(title: str) -> None:
    assert unnamed(entry(title), GROUPS[title](), read) == []


@pytest.mark.parametrize("title", GROUPS)
def test_every_file_naming_all_is_listed(title: str) -> None:
    assert unlisted(entry(title), GROUPS[title](), repository_files(), read) == []


@pytest.mark.parametrize("title", [*GROUPS, "A request field the runtime newly sends",
                                   "An adjustable field"])
def test_every_listed_path_exists(title: str) -> None:
    lists = entry(title)
    missing = [p for paths in lists.values() for p in paths
               if "<" not in p and not (ROOT / p).exists()]
    assert missing == []


FAKE = {"containerd-9.9.9": ("containerd-9.9.9",)}


def test_a_fake_profile_is_found_missing() -> None:
    items = {**profiles(), **FAKE}
    found = unnamed(entry("A runtime profile"), items, read)
    assert "bridge/runtime_facts/profiles.py: does not name containerd-9.9.9" in found
    assert "README.md: does not name containerd-9.9.9" in found
    assert "schemas/test/suite.schema.json: does not name containerd-9.9.9" in found


def test_a_fake_policy_and_event_are_found_missing() -> None:
    policy = unnamed(entry("A policy"), {**policies(), "fake-policy": ("`fake-policy`",)}, read)
    assert "docs/policies/fake-policy.md: missing" in policy
    assert "docs/policy-server.md: does not name fake-policy" in policy
    event = unnamed(entry("An event"), {**events(), "FakeEvent": ("FakeEvent", "FAKE_EVENT")},
                    read)
    assert "schemas/webhook/events/FakeEvent.reply.schema.json: missing" in event
    assert "bridge/contract/catalogue.py: does not name FakeEvent" in event


@pytest.mark.parametrize(("title", "dropped"), [
    ("A runtime profile", "README.md"),
    ("A runtime profile", "schemas/test/suite.schema.json"),
    ("A policy", "docs/policy-server.md"),
    ("An event", "docs/protocol.md"),
])
def test_a_file_taken_off_a_list_is_found_unlisted(title: str, dropped: str) -> None:
    lists = {kind: [p for p in paths if p != dropped] for kind, paths in entry(title).items()}
    assert unlisted(lists, GROUPS[title](), repository_files(), read) == [dropped]


def test_every_profile_runtime_maps_to_its_nri_version() -> None:
    """nri_version.py (listed under the profile's 'Where it differs') knows each runtime."""
    assert "bridge/contract/nri_version.py" in entry("A runtime profile")["Where it differs"]
    wrong = {key: (nri_version_of(p.runtime_name, p.runtime_version, ""), p.nri)
             for key, p in PROFILES.items() if p.runtime_name in ("containerd", "cri-o")
             and nri_version_of(p.runtime_name, p.runtime_version, "") != p.nri}
    assert wrong == {}


# --- a request field: every request message's proto fields in the listed files and schemas


def request_messages() -> dict[str, frozenset[str]]:
    """Every NRI message a request can carry: message name -> its proto field names."""
    return {name: frozenset(f.name for f in message.fields)
            for name, message in api_pb2.DESCRIPTOR.message_types_by_name.items()}


def fields_missing(lists: Mapping[str, list[str]], messages: Mapping[str, frozenset[str]],
                   read: Callable[[str], str | None]) -> list[str]:
    """'path: Message.field' for each field a listed file or schema does not carry."""
    found = []
    for template in lists.get("Names each", []):
        text = read(template) or ""
        for name, fields in messages.items():
            body = re.search(rf"\nmessage {name} \{{(.*?)\n\}}", text, re.S)
            for field in sorted(fields):
                if body is None or not re.search(rf"\b{field}\s*=", body.group(1)):
                    found.append(f"{template}: {name}.{field}")
    for template in lists.get("Regenerated", []):
        if not template.endswith(".json"):
            continue
        for event in EVENT_NAMES if "<" in template else ("",):
            path = expand(template, event)
            schema = read(path)
            if schema is None:
                continue  # an event without a request schema of its own
            defs = json.loads(schema).get("$defs", {})
            for name, fields in messages.items():
                if name in defs:
                    properties = defs[name].get("properties", {})
                    found += [f"{path}: {name}.{f}" for f in sorted(fields - set(properties))]
    return sorted(found)


def _request_defs() -> set[str]:
    text = read("schemas/webhook/request.schema.json") or "{}"
    return set(json.loads(text)["$defs"])


def test_every_request_field_is_in_each_listed_file() -> None:
    lists = entry("A request field the runtime newly sends")
    messages = {n: f for n, f in request_messages().items() if n in _request_defs()}
    assert len(messages) > 20
    assert fields_missing(lists, messages, read) == []


def test_a_fake_request_field_is_found_missing() -> None:
    lists = entry("A request field the runtime newly sends")
    messages = {n: f for n, f in request_messages().items() if n in _request_defs()}
    messages["Container"] = messages["Container"] | {"fake_field"}
    found = fields_missing(lists, messages, read)
    assert "schemas/nri/api.proto: Container.fake_field" in found
    assert "schemas/webhook/request.schema.json: Container.fake_field" in found
    assert ("schemas/webhook/events/CreateContainer.request.schema.json: Container.fake_field"
            in found)


def test_every_adjustable_field_is_in_each_listed_file() -> None:
    lists = entry("An adjustable field")
    messages = {n: request_messages()[n] for n in
                ("ContainerAdjustment", "LinuxContainerAdjustment", "LinuxResources")}
    assert fields_missing({"Names each": ["schemas/nri/api.proto"],
                           "Regenerated": lists.get("Regenerated", [])}, messages, read) == []
    table = read("bridge/contract/adjustment_fields.py") or ""
    assert "bridge/contract/adjustment_fields.py" in lists["Names each"]
    rows = [f for f in sorted(messages["ContainerAdjustment"] | messages["LinuxResources"])
            if not re.search(rf'"{f}"', table)]
    assert rows == []


def test_the_policy_catalogue_points_to_the_one_list() -> None:
    doc = policies_package.__doc__ or ""
    assert 'docs/architecture.md ("Where to add\nthings", "A policy"' in doc
    assert "add one line to" not in doc  # the steps are the docs' list, not a second one
