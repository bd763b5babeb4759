"""A policy's reply reviewed outside the bridge's production path: did its handler crash, and
does it match the reply recorded for the same request.

Owns: `handler_crash` (the note a reply carries when a policy's handler raised:
the policy server writes it, the try and test commands count such a reply as a failed call) and
`replay` (recorded events and the comparison of a policy's replies with the recorded ones, for
nri-webhook-bridge replay and the policy test kit). Must not: do I/O beyond reading a recording
file, or decide what the bridge does with a reply in production (bridge.webhooks).
"""
