"""nri-webhook-bridge: an NRI plugin that delegates container policy to HTTP services."""

__version__ = "0.1.0"
