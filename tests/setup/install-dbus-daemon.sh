#!/usr/bin/env bash
# Debian's dbus-daemon for tests/policy_server/node/test_systemd_bus.py: a real bus on a private
# socket, where a fake systemd answers SetUnitProperties (the tests skip without it).
# Idempotent: a no-op when the installed dbus-daemon runs (`dbus-daemon --version`), else it
# is installed (again); needs root only when it has to install.
set -euo pipefail

log() { echo "install-dbus-daemon: $*" >&2; }
runs() { dbus-daemon --version >/dev/null 2>&1; }

if runs; then
    exit 0
fi
reinstall=()
if command -v dbus-daemon >/dev/null; then
    log "the installed dbus-daemon does not run; installing it again"
    reinstall=(--reinstall)
fi
if ! apt-get install -y -q --no-install-recommends "${reinstall[@]}" dbus-daemon >/dev/null 2>&1; then
    log "apt-get update"
    apt-get update -q >/dev/null || { log "ERROR: apt-get update failed"; exit 1; }
    apt-get install -y -q --no-install-recommends "${reinstall[@]}" dbus-daemon >/dev/null ||
        { log "ERROR: apt-get install dbus-daemon failed"; exit 1; }
fi
runs || { log "ERROR: dbus-daemon still does not run: $(dbus-daemon --version 2>&1 | tail -1)"; exit 1; }
log "$(dbus-daemon --version | head -1)"
