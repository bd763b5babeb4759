"""`nri-webhook-bridge try`: Kubernetes manifests through the real bridge and a simulated
runtime, to see what each webhook would do (docs/try.md).

Owns nothing itself: `try_command` (arguments, exit codes), `play` (the run), `relay`
(recording the webhook calls), `report` (JSON and table), `private_server` (a policy server of
its own for `--policy-module`/`--rules`), `process` (stopping what it started). Must not be
imported by the plugin.
"""
