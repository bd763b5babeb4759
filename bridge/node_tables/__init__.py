"""A node's pods and containers kept current from NRI events: the one fold three owners share.

Owns nothing itself: `fold` (how each lifecycle event changes the tables, on plain values; the
bridge's state cache, the simulated runtime's store and the policy server's NodeView all use it)
and `messages` (its tables over NRI protobuf messages, for the first two). Built on the event
catalogue (bridge.contract.catalogue). Must not: do I/O, or know how events travel.
"""
