"""nri-policy-server: policies as HTTP endpoints for nri-webhook-bridge, and the SDK to write them.

A policy is a ``Policy`` whose handlers are plain functions registered by decorator per NRI
event (event in, decision out, no I/O). This package's names are exactly the SDK's
(``policy_server.sdk``); docs/architecture.md shows the sub-packages behind it.
"""

from policy_server.sdk import *  # noqa: F403 (the SDK is this package's public face)
from policy_server.sdk import __all__ as __all__
