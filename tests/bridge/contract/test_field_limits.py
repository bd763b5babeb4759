"""The request fields' limits (bridge.contract.field_limits): each rule takes what it should and
refuses each way of breaking it, and the table names fields that exist."""

from __future__ import annotations

import pytest

from bridge.contract import request_structs
from bridge.contract.field_limits import (
    CGROUP,
    FIELDS,
    KEY,
    NAME,
    PATH,
    REF,
    TEXT,
    FieldLimit,
    limit_of,
    limit_problem,
)
from bridge.proto.nri import api_pb2

ENVELOPE = {"WebhookRequest", "RuntimeRef", "Update"}


@pytest.mark.parametrize(
    ("limit", "value"),
    [
        (TEXT, "a script\nwith\ttabs\r\n"), (TEXT, "é" * 1000), (TEXT, "x" * (256 << 10)),
        (NAME, "kubernetes.io/name"), (NAME, "x" * 1024), (KEY, "koordinator.sh/qosClass"),
        (PATH, ""), (PATH, "/"), (PATH, "/var/lib/kubelet/pods/x/volumes"), (PATH, "/a/.../b"),
        (PATH, "/a/..b"), (CGROUP, "/kubepods/burstable/pod1/c1"), (CGROUP, ""),
        (CGROUP, "kubepods-burstable-pod1.slice"),
        (CGROUP, "kubepods-pod1.slice:cri-containerd:abc"), (REF, "tmpfs"), (REF, "/host/x"),
        (REF, "a/b"),
    ],
)
def test_taken(limit: FieldLimit, value: str) -> None:
    assert limit_problem(limit, value) is None


@pytest.mark.parametrize(
    ("limit", "value", "why"),
    [
        (TEXT, "a\x00b", "contains a NUL byte"),
        (TEXT, "\x1b[31m", "contains a control character (U+001B)"),
        (TEXT, "\x7f", "contains a control character (U+007F)"),
        (TEXT, "x" * ((256 << 10) + 1), "is longer than 262144 characters"),
        (NAME, "name\n", "contains a control character (U+000A)"),
        (NAME, "\t", "contains a control character (U+0009)"),
        (NAME, "x" * 1025, "is longer than 1024 characters"),
        (PATH, "relative", "is not an absolute path"),
        (PATH, "/a/../b", "has a `..` component"),
        (PATH, "/a/..", "has a `..` component"),
        (PATH, "/\x00", "contains a NUL byte"),
        (PATH, "/" + "x" * 4096, "is longer than 4096 characters"),
        (CGROUP, "kubepods/burstable", "is neither an absolute path nor a systemd slice name"),
        (CGROUP, "/kubepods/../..", "has a `..` component"),
        (CGROUP, "a.slice:cri:..", "has a `..` component"),
        (CGROUP, "..", "has a `..` component"),
        (REF, "../etc", "has a `..` component"),
        (REF, "/x/../../etc", "has a `..` component"),
    ],
)
def test_refused(limit: FieldLimit, value: str, why: str) -> None:
    assert limit_problem(limit, value) == why


def test_the_table_names_fields_that_exist() -> None:
    messages = api_pb2.DESCRIPTOR.message_types_by_name
    for message, field in FIELDS:
        if message in ENVELOPE:  # the envelope's Structs, from the one declaration
            assert field in getattr(request_structs, message).__struct_fields__, (message, field)
            continue
        assert field in messages[message].fields_by_name, (message, field)


def test_unlisted_fields_are_text_and_paths_are_shaped() -> None:
    assert limit_of("Container", "env") is TEXT
    assert limit_of("LinuxContainer", "cgroups_path") is CGROUP
    assert limit_of("Hook", "path") is PATH and limit_of("LinuxDevice", "path") is PATH
    assert limit_of("Mount", "destination") is PATH and limit_of("Mount", "source") is REF
