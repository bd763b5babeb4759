"""Hostile policy replies, end to end over real sockets
(docs/operations.md#hostile-policy-replies-and-security, issue 6 part 2).

Runtime simulator -> bridge (PluginRunner + WebhookHandler, in process) -> a raw
HTTP policy server that answers each case with exactly the bytes it names. For
every case, under both failure policies (`lenient` = Ignore, `strict` = Fail):
- the runtime is answered before its 1 s request timeout and never drops us;
- Ignore answers "no change", Fail fails the operation with
  `webhook "strict" failed (<kind>): <reason>`;
- one `webhook call failed` warning per call with outcome, reason and action,
  and the outcome counted in the metrics;
- nothing the bridge logs is longer than 4 KiB, nothing at error level.

The contract tests in tests/bridge/webhooks (a scripted HTTP policy double) check the
same outcomes one layer down; these check what only a real bridge process shows:
size caps on a live stream, slow bytes, redirects, TLS, and the runtime's deadline.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import ssl
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.hardening.policy_http import (
    Behaviour,
    HttpRequest,
    RawPolicy,
    chunked,
    declared,
    json_reply,
    reply,
    routes,
    trickle,
)
from tests.hardening.policy_stack import (
    REQUEST_TIMEOUT_S,
    WEBHOOK_TIMEOUT_S,
    both,
    check_failure,
    stack,
)
from tests.hardening.policy_tls import Pki, server_context, temporary_pki

# The runtime deadlines, webhook timeouts and trickles run on the event loop's clock (the
# policy double and the bridge share this loop): looptime moves it to the next timer when the
# loop is idle, so they take no wall time (docs/performance.md#make-check).
pytestmark = [pytest.mark.timeout(30), pytest.mark.looptime]

MIB = 1 << 20
GZIP_BOMB = gzip.compress(b" " * (32 * MIB))  # 32 KiB on the wire
VALID = {"adjust": {"env": [{"key": "DECIDED", "value": "1"}]}}


def _cpu(**cpu: Any) -> dict[str, Any]:
    return {"adjust": {"linux": {"resources": {"cpu": cpu}}}}


def _memory(**memory: Any) -> dict[str, Any]:
    return {"adjust": {"linux": {"resources": {"memory": memory}}}}


def _oom(value: int) -> dict[str, Any]:
    return {"adjust": {"linux": {"oom_score_adj": value}}}


def _update_created(request: HttpRequest) -> dict[str, Any]:
    """An update for the very container being created (its id from the request)."""
    return {"update": [{"container_id": request.json()["container"]["id"],
                        "linux": {"resources": {"cpu": {"shares": 512}}}}]}


def _raw(body: bytes | str) -> Behaviour:
    return reply(200, body.encode() if isinstance(body, str) else body)


def _write(data: bytes) -> Behaviour:
    """These bytes, whatever they are, then close."""
    async def behaviour(request: HttpRequest, writer: asyncio.StreamWriter) -> None:
        writer.write(data)
        await writer.drain()
    return behaviour


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@dataclass(frozen=True, slots=True)
class Hostile:
    behaviour: Behaviour
    kind: str  # the failure kind: outcome label, log field, error text
    reason: str  # a fragment of the logged reason and of the runtime's error
    event: str = "CreateContainer"


CASES: dict[str, Hostile] = {
    # -- wrong types -----------------------------------------------------------------
    "shares as a string": Hostile(json_reply(_cpu(shares="1024")), "schema_violation",
                                  "adjust.linux.resources.cpu.shares: expected an integer"),
    "shares as a bool": Hostile(json_reply(_cpu(shares=True)), "schema_violation",
                                "cpu.shares: expected an integer"),
    "shares as a float": Hostile(json_reply(_cpu(shares=2.5)), "schema_violation",
                                 "cpu.shares: expected an integer"),
    "shares NaN": Hostile(_raw('{"adjust":{"linux":{"resources":{"cpu":{"shares":NaN}}}}}'),
                          "schema_violation", "cpu.shares: expected an integer"),
    "env as an object": Hostile(json_reply({"adjust": {"env": {"A": "1"}}}), "schema_violation",
                                "adjust.env: expected a list"),
    "annotation value a number": Hostile(json_reply({"adjust": {"annotations": {"a": 1}}}),
                                         "schema_violation", "adjust.annotations"),
    "update not a list": Hostile(json_reply({"update": {"container_id": "x"}}),
                                 "schema_violation", "update: expected a list"),
    "warnings a string": Hostile(json_reply({"warnings": "careful"}), "schema_violation",
                                 "warnings: expected a list of strings"),
    "reject without a reason": Hostile(json_reply({"reject": {}}), "schema_violation",
                                       "reject"),
    # -- out of range ------------------------------------------------------------------
    "negative shares": Hostile(json_reply(_cpu(shares=-5)), "schema_violation",
                               "cpu.shares: integer -5 out of range"),
    "shares below the kernel minimum": Hostile(json_reply(_cpu(shares=1)), "invalid_value",
                                               "cpu.shares: 1 out of range [2, 262144]"),
    "quota below -1": Hostile(json_reply(_cpu(quota=-2)), "invalid_value",
                              "cpu.quota: -2 out of range"),
    "quota absurd": Hostile(json_reply(_cpu(quota=10**30)), "schema_violation",
                            "cpu.quota: integer 1000000000000000000000000000000 out of range"),
    "period zero": Hostile(json_reply(_cpu(period=0)), "invalid_value",
                           "cpu.period: 0 out of range"),
    "memory limit 2^63": Hostile(json_reply(_memory(limit=2**63)), "schema_violation",
                                 "memory.limit: integer 9223372036854775808 out of range"),
    "memory limit below -1": Hostile(json_reply(_memory(limit=-2)), "invalid_value",
                                     "memory.limit: -2 out of range"),
    "swappiness 101": Hostile(json_reply(_memory(swappiness=101)), "invalid_value",
                              "memory.swappiness: 101 out of range"),
    "oom_score_adj 1001": Hostile(json_reply(_oom(1001)), "invalid_value",
                                  "oom_score_adj: 1001 out of range [-1000, 1000]"),
    "oom_score_adj -1001": Hostile(json_reply(_oom(-1001)), "invalid_value",
                                   "oom_score_adj: -1001 out of range [-1000, 1000]"),
    "integer with 5000 digits": Hostile(_raw('{"warnings": [], "x": ' + "9" * 5000 + "}"),
                                        "invalid_json", "reply is not JSON"),
    # -- cpusets ---------------------------------------------------------------------
    "cpuset '0-'": Hostile(json_reply(_cpu(cpus="0-")), "invalid_value", "invalid cpuset '0-'"),
    "cpuset '3-1'": Hostile(json_reply(_cpu(cpus="3-1")), "invalid_value",
                            "invalid range '3-1'"),
    "cpuset 'a'": Hostile(json_reply(_cpu(cpus="a")), "invalid_value", "invalid cpuset 'a'"),
    "cpuset range past 65535": Hostile(json_reply(_cpu(cpus="0-4294967296")), "invalid_value",
                                       "invalid range '0-4294967296'"),
    "cpuset id with 5000 digits": Hostile(json_reply(_cpu(cpus="0-" + "9" * 5000)),
                                          "invalid_value", "invalid range"),
    "mems ',,'": Hostile(json_reply(_cpu(mems="0,,1")), "invalid_value", "invalid cpuset"),
    # -- targets ---------------------------------------------------------------------
    "update of an unknown container": Hostile(
        json_reply({"update": [{"container_id": "feedface",
                                "linux": {"resources": {"cpu": {"shares": 512}}}}]}),
        "invalid_value", "update[0].container_id: unknown container 'feedface'"),
    "update of the container being created": Hostile(
        json_reply(_update_created), "invalid_value", "is the container being created"),
    # -- keys not allowed for the event, smuggled removals -----------------------------
    "adjust on StartContainer": Hostile(json_reply(VALID), "schema_violation",
                                        "reply.adjust: not allowed for StartContainer",
                                        event="StartContainer"),
    "unknown top-level key": Hostile(json_reply({"adjust": {}, "spec": {"privileged": True}}),
                                     "schema_violation", "reply.spec: not allowed"),
    "unknown field in linux": Hostile(json_reply({"adjust": {"linux": {"privileged": True}}}),
                                      "schema_violation", "adjust.linux.privileged: unknown"),
    "'-' env key in the positive part": Hostile(
        json_reply({"adjust": {"env": [{"key": "-PATH", "value": ""}]}}), "schema_violation",
        "key '-PATH' starts with '-'"),
    "'-' annotation in the positive part": Hostile(
        json_reply({"adjust": {"annotations": {"-io.kubernetes.cri.sandbox-id": ""}}}),
        "schema_violation", "starts with '-'"),
    "remove of a kind that has no removal": Hostile(
        json_reply({"adjust": {"remove": {"hooks": ["x"]}}}), "schema_violation",
        "adjust.remove.hooks: cannot remove hooks"),
    # -- disallowed kinds (default allow list) -----------------------------------------
    "mount": Hostile(json_reply({"adjust": {"mounts": [
        {"destination": "/host", "source": "/", "type": "bind", "options": ["rbind", "rw"]}]}}),
        "disallowed", "adjust: mounts not in the webhook's allow list"),
    "device": Hostile(json_reply({"adjust": {"linux": {"devices": [
        {"path": "/dev/sda", "type": "b", "major": 8, "minor": 0}]}}}),
        "disallowed", "adjust: devices not in the webhook's allow list"),
    "OCI hook": Hostile(json_reply({"adjust": {"hooks": {"prestart": [
        {"path": "/bin/sh", "args": ["sh", "-c", "id"]}]}}}),
        "disallowed", "adjust: hooks not in the webhook's allow list"),
    # -- sizes -------------------------------------------------------------------------
    "content-length over 1 MiB": Hostile(declared(2 * MIB), "reply_too_large",
                                         f"reply of {2 * MIB} bytes exceeds {MIB}"),
    "chunked over 1 MiB": Hostile(
        chunked(json.dumps({"warnings": ["w" * 1000] * 2100}).encode()),
        "reply_too_large", f"reply exceeds {MIB} bytes"),
    "close-delimited over 1 MiB": Hostile(reply(200, b" " * (2 * MIB), length=False),
                                          "reply_too_large", f"reply exceeds {MIB} bytes"),
    "gzip bomb": Hostile(reply(200, GZIP_BOMB,
                               extra=[("content-encoding", "gzip")]),
                         "invalid_json", "reply has content-encoding 'gzip'"),
    # -- slow and broken servers -------------------------------------------------------
    "trickled bytes": Hostile(trickle(json.dumps(VALID).encode(), 0.02), "timeout",
                              f"no reply within {WEBHOOK_TIMEOUT_S * 1000:.0f} ms"),
    "stalls after the head": Hostile(declared(100), "timeout", "no reply within"),
    "closes without answering": Hostile(_write(b""), "transport_error", ""),
    "not HTTP at all": Hostile(_write(b"SSH-2.0-OpenSSH_9.6\r\n"), "transport_error", ""),
    # -- status codes and redirects ----------------------------------------------------
    "HTTP 500": Hostile(reply(500, b"Traceback (most recent call last): ...",
                              content_type="text/plain"),
                        "http_status", "HTTP 500: Traceback"),
    "HTTP 503 with a 1 MiB page": Hostile(reply(503, b"x" * MIB, content_type="text/html"),
                                          "http_status", "HTTP 503: xxxx"),
    "HTTP 502 without a body": Hostile(reply(502), "http_status", "HTTP 502"),
    "HTTP 500 with a gzip-encoded page": Hostile(
        reply(500, GZIP_BOMB, extra=[("content-encoding", "gzip")]),
        "http_status", "HTTP 500: "),
    # -- not JSON, not an object, too deep -----------------------------------------------
    "invalid JSON": Hostile(_raw("{nope"), "invalid_json", "reply is not JSON"),
    "truncated JSON": Hostile(_raw('{"adjust": {"env": ['), "invalid_json", "not JSON"),
    "trailing garbage": Hostile(_raw("{} {}"), "invalid_json", "Extra data"),
    "not UTF-8": Hostile(_raw(b'{"warnings": ["\xff\xfe"]}'), "invalid_json", "not JSON"),
    "a JSON list": Hostile(_raw("[]"), "schema_violation", "reply: expected a JSON object"),
    "a JSON string": Hostile(_raw('"ok"'), "schema_violation", "expected a JSON object"),
    "JSON null": Hostile(_raw("null"), "schema_violation", "expected a JSON object"),
    "a JSON number": Hostile(_raw("42"), "schema_violation", "expected a JSON object"),
    "100,000 nested lists": Hostile(_raw(_nested(100_000)), "invalid_json", "nested too deeply"),
    "500 nested objects in an annotation": Hostile(
        _raw('{"adjust": {"annotations": {"a": ' + '{"b": ' * 500 + "1" + "}" * 501 + "}}"),
        "schema_violation", "adjust.annotations"),
}


async def test_a_valid_reply_is_applied(workdir: Path) -> None:
    """The control case: the same stack applies a good reply under both policies."""
    async with stack(workdir, json_reply(VALID)) as s:
        results = await both(s)
    for result in results.values():
        assert result.ok and result.container is not None, result.error
        assert "DECIDED=1" in result.container.env


@pytest.mark.parametrize("name", CASES)
async def test_hostile_reply(name: str, workdir: Path, caplog: pytest.LogCaptureFixture) -> None:
    case = CASES[name]
    with caplog.at_level(logging.INFO):
        async with stack(workdir, case.behaviour) as s:
            results = await both(s, case.event)
    check_failure(s, caplog.records, results, case.kind, case.reason, case.event)
    assert [r.path for r in s.policy.requests] == ["/v1/policy"] * 2


async def test_a_trickle_is_cut_at_the_runtime_deadline(workdir: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    """A webhook timeout (5 s) far beyond the runtime's (1 s): the runtime's deadline wins."""
    with caplog.at_level(logging.INFO):
        async with stack(workdir, trickle(json.dumps(VALID).encode(), 0.02), timeout="5s") as s:
            results = await both(s)
    check_failure(s, caplog.records, results, "timeout", "no reply within")
    budgets = [r.budget_ms for r in caplog.records  # type: ignore[attr-defined]
               if r.getMessage() == "webhook call failed"]
    assert len(budgets) == 2 and all(500 < b < REQUEST_TIMEOUT_S * 1000 for b in budgets)


@pytest.mark.parametrize("status", [301, 302, 307, 308])
async def test_redirects_are_not_followed(status: int, workdir: Path,
                                          caplog: pytest.LogCaptureFixture) -> None:
    # The redirect target would answer with an adjustment; following it would apply it.
    policy = routes({"/v1/policy": reply(status, b"", extra=[("location", "/v1/elsewhere")]),
                     "/v1/elsewhere": json_reply(VALID)})
    with caplog.at_level(logging.INFO):
        async with stack(workdir, policy) as s:
            results = await both(s)
    check_failure(s, caplog.records, results, "http_status", f"HTTP {status}")
    assert [r.path for r in s.policy.requests] == ["/v1/policy"] * 2


@pytest.fixture(scope="module")
def pki() -> Iterator[Pki]:
    with temporary_pki() as made:
        yield made


# name -> (server TLS context or None, bridge side: URL scheme and webhook keys, kind, reason)
TlsCase = Callable[[Pki], tuple[ssl.SSLContext | None, str, dict[str, Any]]]
TLS_CASES: dict[str, tuple[TlsCase, str, str]] = {
    "self-signed server, system CAs": (
        lambda p: (server_context(p.self_signed_cert, p.self_signed_key), "https", {}),
        "connect_error", "CERTIFICATE_VERIFY_FAILED"),
    "server certificate from another CA": (
        lambda p: (server_context(p.server_cert, p.server_key), "https",
                   {"tls": {"ca_file": str(p.other_ca)}}),
        "connect_error", "CERTIFICATE_VERIFY_FAILED"),
    # TLS 1.3: the client's side of the handshake completes; the server's refusal
    # arrives as a reset once the request is on its way.
    "client certificate required, none configured": (
        lambda p: (server_context(p.server_cert, p.server_key, client_ca=p.ca), "https",
                   {"tls": {"ca_file": str(p.ca)}}),
        "transport_error", ""),
    # The raw server waits for a request head that a TLS ClientHello never completes.
    "https to a server that never answers the handshake": (
        lambda p: (None, "https", {"tls": {"ca_file": str(p.ca)}}), "timeout",
        "no reply within"),
    "http to a TLS server": (
        lambda p: (server_context(p.server_cert, p.server_key), "http", {}),
        "transport_error", ""),
}


@pytest.mark.processes
@pytest.mark.parametrize("name", TLS_CASES)
async def test_tls_failures(name: str, pki: Pki, workdir: Path,
                            caplog: pytest.LogCaptureFixture) -> None:
    setup, kind, reason = TLS_CASES[name]
    server_ssl, scheme, hook = setup(pki)
    policy = RawPolicy(json_reply(VALID), server_ssl)
    with caplog.at_level(logging.INFO):
        async with stack(workdir, policy, tcp=True, scheme=scheme, **hook) as s:
            results = await both(s)
    check_failure(s, caplog.records, results, kind, reason)
    assert policy.requests == []  # nothing was ever answered over the failed channel



