#!/usr/bin/env bash
# Runs inside the guest (started by nri-node-v2.service at boot): pytest on the tests the
# host asked for, results written back through the shared repository, then power off
# (the unit's SuccessAction/FailureAction).
#
# The host writes <result dir>/request (one pytest argument per line) before the boot; this
# script writes pytest.log, junit.xml, exit-code, node.txt and journal.log beside it.
set -u
# The host names this guest's result directory on the kernel command line (nri.out=, relative
# to the repository): several guests may run side by side (tests/node_v2/setup/run-guest.sh).
OUT=/src/$(sed -n 's/.*[[:space:]]nri\.out=\([^[:space:]]*\).*/\1/p' /proc/cmdline)
[[ $OUT != /src/ ]] || OUT=/src/.e2e/node-v2
cd /src || exit 1
mkdir -p "$OUT"
mapfile -t args < <(grep -v '^[[:space:]]*$' "$OUT/request" 2>/dev/null || true)

{
    echo "kernel: $(uname -r)"
    echo "cgroup: $(stat -fc %T /sys/fs/cgroup)"
    echo "controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
    echo "systemd: $(systemctl --version | head -1)"
    echo "runc (trixie): $(/usr/sbin/runc --version | head -1)"
    echo "runc (sid): $(/opt/runc-1.3/usr/sbin/runc --version | head -1)"
    echo "python: $(/opt/nri-venv/bin/python --version)"
    echo "cpus: $(nproc), memory: $(awk '/MemTotal/ {print $2 " kB"}' /proc/meminfo)"
} >"$OUT/node.txt" 2>&1
cat "$OUT/node.txt"

export NRI_NODE_V2_GUEST=1
# Emulation: every wait of the e2e harness (tests/e2e/procs.py) grows to match.
export NRI_E2E_TIME_SCALE=10
export PYTHONUNBUFFERED=1
start=$SECONDS
# Software emulation is much slower than the host (docs/e2e.md#the-cgroup-v2-node): the per-test timeout grows
# to match (the suite's 120 s is sized for the host).
# -v: pytest.log names the test that runs (a guest stopped by its timeout leaves no junit.xml);
# --durations: where a slow run's time went.
/opt/nri-venv/bin/python -m pytest -p no:cacheprovider -o timeout=1200 -m node_v2 -rfE -v --durations=15 \
    --junitxml="$OUT/junit.xml" "${args[@]}" >"$OUT/pytest.log" 2>&1
rc=$?
echo "pytest exit $rc after $((SECONDS - start)) s" >>"$OUT/node.txt"
tail -5 "$OUT/pytest.log"
journalctl -b --no-pager -o short-monotonic >"$OUT/journal.log" 2>&1
echo "$rc" >"$OUT/exit-code"
sync
exit 0
