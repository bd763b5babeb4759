"""The bridge's handler, built from its configuration — possibly the one the runtime sends.

A plugin the runtime launches from its plugin directory gets no arguments; its
configuration is the runtime's `<conf.d>/NN-name.conf` (else `name.conf`), which
arrives as the string ConfigureRequest.config (protocol §3.2; external plugins
always get ""). So the handler can only be built once Configure is here.

Precedence: a `--config` file wins (a config string from the runtime is then
ignored, and the log says so); else a non-empty config string from Configure;
else the defaults (the static handler, no webhooks). A config string that does
not parse is logged as an error naming the offending key and raised as
ConfigError, which the plugin service answers as a Configure error: the runtime
logs it and drops the plugin instead of running it half-configured.

Owns: choosing and building the handler, and forwarding every event to it. Must
not: parse anything itself (bridge.config does) or know the wire.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from bridge.config import BridgeConfig, load_text
from bridge.contract.catalogue import Event
from bridge.errors import ConfigError
from bridge.metrics import Metrics
from bridge.nri.handler_api import EventContext, Handler, RuntimeInfo
from bridge.nri.static import StaticHandler
from bridge.proto.nri import api_pb2 as api
from bridge.webhooks.fanout import WebhookHandler

log = logging.getLogger(__name__)

RUNTIME_CONFIG_SOURCE = "runtime config (Configure.config)"


def build_handler(config: BridgeConfig, metrics: Metrics,
                  knows_container: Callable[[str], bool] = lambda _: False) -> Handler:
    if config.webhooks:
        return WebhookHandler(config.webhooks, metrics, knows_container=knows_container)
    return StaticHandler(config.static)


def handler_kind(handler: Handler) -> str:
    return "webhooks" if isinstance(handler, WebhookHandler) else "static"


class ConfiguredHandler(Handler):
    """Forwards every event to the handler the configuration asks for (see module doc)."""

    def __init__(self, config: BridgeConfig, metrics: Metrics, *, from_file: bool,
                 knows_container: Callable[[str], bool] = lambda _: False) -> None:
        self._metrics = metrics
        self._from_file = from_file
        self._knows = knows_container
        self._runtime_text: str | None = None
        self.config = config
        self.inner = build_handler(config, metrics, knows_container)

    def use_state(self, knows_container: Callable[[str], bool]) -> None:
        """Let webhook replies be checked against the plugin's state cache."""
        self._knows = knows_container
        if isinstance(self.inner, WebhookHandler):
            self.inner.knows_container = knows_container

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
            self.inner = build_handler(config, self._metrics, self._knows)
            log.info("configured from the runtime's configuration string",
                     extra={"handler": handler_kind(self.inner),
                            "webhooks": [w.name for w in config.webhooks]})
        await self.inner.configure(runtime)

    async def aclose(self) -> None:
        if isinstance(self.inner, WebhookHandler):
            await self.inner.aclose()

    def wanted_events(self) -> frozenset[Event]:
        return self.inner.wanted_events()

    # -- forwarding: one method per event (the plugin service looks them up by name) ----

    async def synchronize(self, ctx: EventContext, pods: Sequence[api.PodSandbox],
                          containers: Sequence[api.Container]) -> Sequence[api.ContainerUpdate]:
        return await self.inner.synchronize(ctx, pods, containers)

    async def run_pod_sandbox(self, ctx: EventContext, req: api.RunPodSandboxRequest) -> None:
        await self.inner.run_pod_sandbox(ctx, req)

    async def update_pod_sandbox(self, ctx: EventContext, req: api.UpdatePodSandboxRequest) -> None:
        await self.inner.update_pod_sandbox(ctx, req)

    async def post_update_pod_sandbox(
            self, ctx: EventContext, req: api.PostUpdatePodSandboxRequest) -> None:
        await self.inner.post_update_pod_sandbox(ctx, req)

    async def stop_pod_sandbox(self, ctx: EventContext, req: api.StopPodSandboxRequest) -> None:
        await self.inner.stop_pod_sandbox(ctx, req)

    async def remove_pod_sandbox(self, ctx: EventContext, req: api.RemovePodSandboxRequest) -> None:
        await self.inner.remove_pod_sandbox(ctx, req)

    async def create_container(self, ctx: EventContext, req: api.CreateContainerRequest,
                               ) -> api.CreateContainerResponse | None:
        return await self.inner.create_container(ctx, req)

    async def post_create_container(
            self, ctx: EventContext, req: api.PostCreateContainerRequest) -> None:
        await self.inner.post_create_container(ctx, req)

    async def start_container(self, ctx: EventContext, req: api.StartContainerRequest) -> None:
        await self.inner.start_container(ctx, req)

    async def post_start_container(
            self, ctx: EventContext, req: api.PostStartContainerRequest) -> None:
        await self.inner.post_start_container(ctx, req)

    async def update_container(self, ctx: EventContext, req: api.UpdateContainerRequest,
                               ) -> api.UpdateContainerResponse | None:
        return await self.inner.update_container(ctx, req)

    async def post_update_container(
            self, ctx: EventContext, req: api.PostUpdateContainerRequest) -> None:
        await self.inner.post_update_container(ctx, req)

    async def stop_container(self, ctx: EventContext, req: api.StopContainerRequest,
                             ) -> api.StopContainerResponse | None:
        return await self.inner.stop_container(ctx, req)

    async def remove_container(self, ctx: EventContext, req: api.RemoveContainerRequest) -> None:
        await self.inner.remove_container(ctx, req)

    async def validate_container_adjustment(
            self, ctx: EventContext, req: api.ValidateContainerAdjustmentRequest,
    ) -> api.ValidateContainerAdjustmentResponse | None:
        return await self.inner.validate_container_adjustment(ctx, req)
