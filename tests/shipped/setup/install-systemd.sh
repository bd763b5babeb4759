#!/usr/bin/env bash
# Run the shell block of docs/deployment.md "## 3. systemd" in an image build: every command
# as written, except the two that need a running systemd (daemon-reload; enable --now becomes
# enable, the node starts them when it boots).
set -euo pipefail
block=$(awk '/^## 3\. systemd/ { on = 1; next } on && /^```sh/ { inside = 1; next }
             inside && /^```/ { exit } inside { print }' docs/deployment.md)
[[ -n $block ]] || { echo "no shell block under '## 3. systemd' in docs/deployment.md" >&2; exit 1; }
block=$(printf '%s\n' "$block" | sed -e '/^systemctl daemon-reload/d' \
    -e 's/^systemctl enable --now /systemctl enable /' \
    -e 's|^nri-webhook-bridge validate-config|/opt/nri-webhook-bridge/bin/nri-webhook-bridge validate-config|')
printf '%s\n' "$block" >&2
set -x
eval "$block"
