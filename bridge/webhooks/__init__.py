"""Webhook delegation: NRI events become HTTP calls to policy services, replies become NRI answers.

Modules: `config` (specs from YAML), `selector`, `client` + `http1` (kept-alive HTTP/1.1
connections, replies parsed by httptools), `breaker`, `webhook` (one call), `guard` + `values`
+ `kinds` (reply checks, allow list), `merge` (ownership, conflicts), `payload` (envelopes),
`failures` (why a call failed), `fanout` (the EventHandler).
"""
