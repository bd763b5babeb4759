#!/usr/bin/env bash
# Debian's dbus-daemon for tests/policy_server/node/test_systemd_bus.py: a real bus on a private
# socket, where a fake systemd answers SetUnitProperties (the tests skip without it).
# Idempotent; needs root only when it has to install.
set -euo pipefail

log() { echo "install-dbus-daemon: $*" >&2; }

if command -v dbus-daemon >/dev/null; then
    exit 0
fi
if ! apt-get install -y -q --no-install-recommends dbus-daemon >/dev/null 2>&1; then
    log "apt-get update"
    apt-get update -q >/dev/null || { log "ERROR: apt-get update failed"; exit 1; }
    apt-get install -y -q --no-install-recommends dbus-daemon >/dev/null ||
        { log "ERROR: apt-get install dbus-daemon failed"; exit 1; }
fi
log "$(dbus-daemon --version | head -1)"
