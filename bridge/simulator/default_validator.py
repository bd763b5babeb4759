"""The runtime's built-in default validator (NRI v0.10+), as far as fail-closed needs it.

containerd >= 2.2 and CRI-O >= 1.34 can load a validator of their own, plugin
`00-default-validator` (docs/protocol.md#validation; recorded runtimes name it so). This
simulates its required-plugins check: CreateContainer is rejected unless every
required plugin (bare name or `NN-name`) is connected, or the pod tolerates
their absence through the configured annotation, looked up on the pod's
annotations as `<key>/container.<name>`, then `<key>/pod`, then `<key>`. The
rejection reason is our wording; the runtimes' own text may differ. Its
adjustment checks (hooks, seccomp, namespaces, sysctls) are not simulated.

Owns: that decision. Must not: talk to plugins (dispatch.py runs it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from bridge.proto.nri import api_pb2 as api

NAME = "default-validator"
INDEX = "00"
LABEL = f"{INDEX}-{NAME}"


@dataclass(frozen=True, slots=True)
class DefaultValidator:
    required_plugins: tuple[str, ...] = ()
    tolerate_missing_plugins_annotation: str = ""

    def instance(self) -> api.PluginInstance:
        return api.PluginInstance(name=NAME, index=INDEX)

    def refusal(self, pod: api.PodSandbox, container: api.Container,
                connected: Iterable[tuple[str, str]]) -> str | None:
        """Why the creation is rejected, or None. `connected`: (name, index) pairs."""
        present: set[str] = set()
        for name, index in connected:
            present |= {name, f"{index}-{name}"}
        missing = [p for p in self.required_plugins if p not in present]
        if not missing or self._tolerated(pod, container.name):
            return None
        return f"required plugins {', '.join(repr(m) for m in missing)} not present"

    def _tolerated(self, pod: api.PodSandbox, container_name: str) -> bool:
        key = self.tolerate_missing_plugins_annotation
        if not key:
            return False
        for candidate in (f"{key}/container.{container_name}", f"{key}/pod", key):
            if candidate in pod.annotations:
                value: str = pod.annotations[candidate]
                return value.strip().lower() == "true"
        return False
