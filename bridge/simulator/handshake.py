"""The runtime's half of the plugin handshake: identity, Configure, mask, Synchronize.

Pure decisions (`identity_problem`, `configure_request`, `accepted_mask`) plus
`synchronize`, which drives one (possibly split) Synchronize over a
connection. Failures raise `HandshakeFailed` with the reason the runtime logs
when it closes the plugin (docs/protocol.md#registration,
docs/protocol.md#configure-and-the-event-mask, docs/protocol.md#synchronize,
docs/protocol.md#when-the-runtime-drops-a-plugin).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence

from bridge.proto.nri import api_pb2 as api
from bridge.runtime_facts.profiles import RuntimeProfile
from bridge.simulator.connection import (
    PLUGIN_SERVICE,
    PluginConnection,
    PluginFailed,
    PluginFatal,
    decode_message,
)
from bridge.simulator.sync import SyncSplitter, SyncTooLarge
from bridge.wire import envelope, ttrpc

_INDEX_RE = re.compile(r"^[0-9]{2}$")
_NAME_RE = re.compile(r"^[A-Za-z0-9_.+-]+$")


class HandshakeFailed(Exception):
    """The plugin cannot be started; the message is the close reason."""


def identity_problem(profile: RuntimeProfile, name: str, index: str) -> str | None:
    """Why RegisterPlugin must be refused, or None (names checked since v0.12)."""
    if not _INDEX_RE.match(index):
        return f"invalid plugin index {index!r}, must be 2 digits"
    if not name:
        return "empty plugin name"
    if profile.checks_plugin_name and not _NAME_RE.match(name):
        return f"invalid plugin name {name!r}"
    return None


def configure_request(profile: RuntimeProfile, config: str, registration_timeout_s: float,
                      request_timeout_s: float) -> api.ConfigureRequest:
    req = api.ConfigureRequest(config=config, runtime_name=profile.runtime_name,
                               runtime_version=profile.runtime_version)
    if profile.sends_timeouts:
        req.registration_timeout = round(registration_timeout_s * 1000)
        req.request_timeout = round(request_timeout_s * 1000)
    if profile.sends_nri_version:
        req.NRI_version = profile.nri_version_string
    return req


def accepted_mask(profile: RuntimeProfile, events: int) -> int:
    """The subscription the runtime records for ConfigureResponse.events."""
    valid = profile.valid_mask
    mask = events & 0xFFFFFFFF
    if mask == 0:
        # 0 subscribes to every event the runtime knows
        # (docs/protocol.md#configure-and-the-event-mask).
        return valid
    if mask & ~valid:
        raise HandshakeFailed(f"invalid event mask 0x{mask:x}: bits 0x{mask & ~valid:x} "
                              f"are not events of this runtime (valid 0x{valid:x})")
    return mask


async def synchronize(conn: PluginConnection, profile: RuntimeProfile,
                      pods: Sequence[api.PodSandbox], containers: Sequence[api.Container],
                      timeout_s: float) -> list[api.ContainerUpdate]:
    """Send the state in as many chunks as the profile needs; returns the plugin's updates."""
    loop = asyncio.get_running_loop()
    splitter = SyncSplitter(pods, containers)
    limit = profile.max_send_bytes
    deadline = loop.time() + timeout_s  # one budget for all chunks (docs/protocol.md#synchronize)
    while True:
        request = splitter.request()
        payload = request.SerializeToString()
        remaining = deadline - loop.time()
        data = envelope.encode_request(envelope.Request(
            PLUGIN_SERVICE, "Synchronize", payload, timeout_nano=max(1, int(remaining * 1e9))))
        if len(data) > limit:
            if not profile.splits_sync:
                raise HandshakeFailed(f"failed to synchronize plugin: message of {len(data)} "
                                      f"bytes exceeds {limit} bytes")
            try:
                splitter.rejected(len(data), limit)
            except SyncTooLarge as exc:
                raise HandshakeFailed(f"failed to synchronize plugin: {exc}") from None
            continue
        if remaining <= 0:
            raise HandshakeFailed("failed to synchronize plugin: request timed out")
        try:
            if len(data) > ttrpc.MAX_MESSAGE_BYTES:
                # A v0.6 runtime's ttrpc sends it anyway, as one oversized message.
                reply = await conn.call_raw(data, remaining)
                if not reply.ok:
                    raise PluginFailed(reply.code, reply.message)
                answer = reply.payload
            else:
                answer = await conn.call("Synchronize", payload, remaining)
            response = decode_message(api.SynchronizeResponse, answer)
        except (PluginFatal, PluginFailed) as exc:
            raise HandshakeFailed(f"failed to synchronize plugin: {exc}") from None
        conn.sync_chunks += 1
        done = splitter.accepted()
        if request.more:
            if response.update or not response.more:
                raise HandshakeFailed("plugin does not handle split sync requests")
            continue
        assert done
        return list(response.update)
