"""The bridge's control API: unsolicited updates, state, health, readiness, metrics."""
