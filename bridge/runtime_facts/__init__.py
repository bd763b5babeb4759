"""What real container runtimes do, as pure values: the facts the simulator, `try` and the
policy test kit share.

Owns: the runtime profiles (`profiles`: what a runtime build does on the NRI wire, derived from
the NRI version it embeds), what a runtime adds to kubelet's CRI configs (`runtime_defaults`),
which NRI events a CRI call becomes (`cri_events`), how a runtime applies a merged adjustment
or an update to its container (`apply`, with the contract's one overlay rule,
bridge.contract.resource_overlay), NRI's merge of resources (`linux_resources`). Written from
recordings of real runtimes (bridge/simulator/scenarios) and docs/protocol.md.

Must not: do I/O, import asyncio or sockets, or know the plugin (wire, transport, nri,
webhooks) or the simulator that plays these facts over a socket. `bridge.kube` and
`bridge.simulator` both build on it, so neither needs the other.
"""
