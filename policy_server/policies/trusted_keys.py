"""The pod labels and annotations a pod's author must not set freely: one declaration.

Owns the list an admission policy guards (deploy/kubernetes/admission/; its test keeps its key
lists equal to these): every key the built-in policies read as a grant
(docs/security.md#pod-metadata-is-input-not-authority), and the runtime's
``tolerate-missing-nri-plugins.noderesource.dev`` with which a pod opts out of fail closed.

- ``EXACT_KEYS``: labels and annotations matched by name (koordinator's keys, from
  ``koordinator_qos.keys.TRUSTED_KEYS``, which stays that policy's own declaration).
- ``ANNOTATION_DOMAINS``: annotation domains matched as a prefix ``<domain>/`` — NRI's sample
  plugin scheme ``<domain>/container.<name>`` and ``<domain>/pod`` (device-injector's devices,
  mounts and CDI devices, ulimit-adjuster's rlimits, the runtime's tolerate-missing-plugins,
  which containerd also reads under the bare domain as a key).

hook-injector's ``when.annotations`` patterns come from the operator's hook files, not from
here: its ``namespaces`` scope is the guard for them. Must not do I/O.
"""

from __future__ import annotations

from policy_server.policies import device_injector, ulimit_adjuster
from policy_server.policies.koordinator_qos import keys as koordinator_keys

# containerd's default validator (and the simulator's): the pod's way out of required plugins.
TOLERATE_MISSING_NRI_PLUGINS = "tolerate-missing-nri-plugins.noderesource.dev"

KOORDINATOR_KEYS: tuple[str, ...] = koordinator_keys.TRUSTED_KEYS
ANNOTATION_DOMAINS: tuple[str, ...] = (
    *device_injector.DOMAINS,
    ulimit_adjuster.DOMAIN,
    TOLERATE_MISSING_NRI_PLUGINS,
)
EXACT_KEYS: tuple[str, ...] = (*KOORDINATOR_KEYS, TOLERATE_MISSING_NRI_PLUGINS)
