"""`nri-webhook-bridge runtime-config`: the runtime configuration change that turns NRI on.

Owns: which table and key names each runtime and version reads (`runtime_tables`), the values
the change sets (`nri_settings`: socket, plugin directories, timeouts, the default validator's
fail-closed options), editing a TOML file while keeping its other content and comments
(`toml_change`) and the command itself (`runtime_config_command`: print, or `--write`).

Must not: start, stop or signal a runtime, or touch any file but the one named by `--file`;
import the plugin (nri, webhooks) or the simulator.
"""
