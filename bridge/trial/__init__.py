"""`nri-webhook-bridge try`: Kubernetes manifests through the real bridge and a simulated
runtime, to see what each webhook would do (docs/try.md).

Owns nothing itself: command (arguments, exit codes), play (the run), relay (recording the
webhook calls), report (JSON and table). Must not be imported by the plugin.
"""
