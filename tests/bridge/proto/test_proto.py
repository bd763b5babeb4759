"""The generated Python code and its type stubs are current, and the schema matches the NRI
wire numbers."""

from __future__ import annotations

from pathlib import Path

import pytest

from bridge.proto import generate
from bridge.proto.nri import api_pb2 as api


def test_generated_code_is_not_stale(tmp_path: Path) -> None:
    fresh = generate.generate(tmp_path)
    assert {p.name for p in fresh} >= {"api_pb2.py", "api_pb2.pyi", "ttrpc_pb2.py",
                                       "ttrpc_pb2.pyi"}
    assert {p.relative_to(tmp_path).as_posix() for p in fresh} >= {"cri/runtime_pb2.py",
                                                                   "cri/runtime_pb2.pyi"}
    for path in fresh:
        committed = generate.PACKAGE_DIR / path.relative_to(tmp_path)
        assert committed.exists(), f"{committed} missing: run `make proto`"
        assert committed.read_text() == path.read_text(), (
            f"{committed} is stale: run `make proto`")


# Spot checks of field numbers against the upstream API (docs/protocol.md#messages).
@pytest.mark.parametrize(("message", "field", "number"), [
    ("ConfigureResponse", "events", 2),
    ("ConfigureRequest", "request_timeout", 5),
    ("ConfigureRequest", "NRI_version", 6),
    ("SynchronizeRequest", "more", 3),
    ("SynchronizeResponse", "more", 2),
    ("ContainerAdjustment", "annotations", 2),
    ("ContainerAdjustment", "args", 9),
    ("LinuxContainerAdjustment", "memory_policy", 12),
    ("Container", "image", 22),
    ("Container", "CDI_devices", 20),
    ("PodSandbox", "ips", 10),
    ("LinuxResources", "pids", 8),
    ("LinuxCPU", "mems", 7),
    ("LinuxRdt", "remove", 4),
    ("ValidateContainerAdjustmentRequest", "plugins", 6),
    ("StateChangeEvent", "container", 3),
    ("UpdateContainersRequest", "evict", 2),
])
def test_field_numbers(message: str, field: str, number: int) -> None:
    assert getattr(api, message).DESCRIPTOR.fields_by_name[field].number == number


def test_services() -> None:
    plugin = api.DESCRIPTOR.services_by_name["Plugin"]
    assert plugin.full_name == "nri.pkg.api.v1alpha1.Plugin"
    assert len(plugin.methods) == 18
    runtime = api.DESCRIPTOR.services_by_name["Runtime"]
    assert sorted(m.name for m in runtime.methods) == ["RegisterPlugin", "UpdateContainers"]


def test_event_enum_and_field_none() -> None:
    assert api.VALIDATE_CONTAINER_ADJUSTMENT == 14 and api.LAST == 15
    assert api.Field.Value("None") == 0 and api.Field.Value("MemoryPolicy") == 40


def test_stubs_are_valid_python() -> None:
    # protoc copies api.proto's enum value `None` into the stub verbatim; generate() comments
    # it out so mypy can read the stub at all.
    stub = (generate.PACKAGE_DIR / "nri" / "api_pb2.pyi").read_text()
    compile(stub, "api_pb2.pyi", "exec")
    assert api.Field.Value("None") == 0
