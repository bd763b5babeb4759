"""The bridge's handler, built from its configuration — possibly the one the runtime sends.

A plugin the runtime launches from its plugin directory gets no arguments; its
configuration is the runtime's `<conf.d>/NN-name.conf` (else `name.conf`), which
arrives as the string ConfigureRequest.config (docs/protocol.md#launched-plugins; external plugins
always get ""). So the handler can only be built once Configure is here.

Precedence: a `--config` file wins (a config string from the runtime is then
ignored, and the log says so); else a non-empty config string from Configure;
else the defaults (the static handler, no webhooks). A config string that does
not parse is logged as an error naming the offending key and raised as
ConfigError, which the plugin service answers as a Configure error: the runtime
logs it and drops the plugin instead of running it half-configured.

Owns: choosing and building the handler, and passing every EventCall to it (it
sits on the event path like any other EventHandler). Must not: parse anything
itself (bridge.config_file does) or know the wire.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from bridge.config_file import BridgeConfig, load_text
from bridge.contract.catalogue import NriEvent
from bridge.errors import ConfigError
from bridge.metrics import BridgeMetrics
from bridge.nri.event_call import Answer, EventCall, RuntimeInfo
from bridge.nri.static import StaticHandler
from bridge.webhooks.guard import Lookup
from bridge.webhooks.webhook_handler import WebhookHandler

log = logging.getLogger(__name__)

RUNTIME_CONFIG_SOURCE = "runtime config (Configure.config)"


def build_handler(config: BridgeConfig, metrics: BridgeMetrics,
                  knows_container: Callable[[str], bool],
                  lookup: Lookup | None = None) -> WebhookHandler | StaticHandler:
    if config.webhooks:
        return WebhookHandler(config.webhooks, metrics, knows_container=knows_container,
                              lookup=lookup, node=config.node)
    return StaticHandler(config.static)


def handler_kind(handler: WebhookHandler | StaticHandler) -> str:
    return "webhooks" if isinstance(handler, WebhookHandler) else "static"


class ConfiguredHandler:
    """The EventHandler the configuration asks for (see module doc): every call goes to
    `inner`, which Configure may replace. `knows_container` answers whether an update target
    exists and `lookup` finds it with its pod (the plugin's state cache), for the webhooks'
    reply guard."""

    def __init__(self, config: BridgeConfig, metrics: BridgeMetrics, *, from_file: bool,
                 knows_container: Callable[[str], bool] = lambda _: False,
                 lookup: Lookup | None = None) -> None:
        self._metrics = metrics
        self._from_file = from_file
        self._knows = knows_container
        self._lookup = lookup
        self._runtime_text: str | None = None
        self.config = config
        self.inner = build_handler(config, metrics, knows_container, lookup)

    async def configure(self, runtime: RuntimeInfo) -> None:
        text = runtime.config
        if text.strip() and self._from_file:
            log.info("the runtime sent a configuration string; ignoring it: --config wins",
                     extra={"bytes": len(text)})
        elif text.strip() and text != self._runtime_text:
            try:
                config = load_text(text, RUNTIME_CONFIG_SOURCE)
            except ConfigError as exc:
                log.error("the configuration the runtime sent is invalid; refusing Configure",
                          extra={"error": str(exc), "key": exc.key})
                raise
            if config.control != self.config.control:
                # The control API is listening before the runtime connects.
                log.warning("the runtime's configuration string sets 'control'; it cannot "
                            "apply (the control API starts before Configure): use the "
                            "--control-* flags in the plugin's wrapper instead")
            await self.aclose()
            self.config, self._runtime_text = config, text
            self.inner = build_handler(config, self._metrics, self._knows, self._lookup)
            log.info("configured from the runtime's configuration string",
                     extra={"handler": handler_kind(self.inner),
                            "webhooks": [w.name for w in config.webhooks]})
        await self.inner.configure(runtime)

    def wanted_events(self) -> frozenset[NriEvent]:
        return self.inner.wanted_events()

    async def handle(self, call: EventCall) -> Answer:
        return await self.inner.handle(call)

    async def aclose(self) -> None:
        if isinstance(self.inner, WebhookHandler):
            await self.inner.aclose()
