#!/usr/bin/env bash
# Boot the cgroup v2 + systemd guest (tests/node_v2/setup/build-guest.sh) and run pytest
# on the node_v2 tests inside it. Arguments are passed to pytest in the guest (default:
# tests/node_v2). Prints the guest's pytest summary; exits with pytest's exit code.
#
# The repository is shared read-write over 9p at /src (results come back through it, in
# .e2e/node-v2/); the host's e2e cache (containerd 2.1.9, images) read-only. The disk is
# opened with -snapshot, so nothing a boot does survives it. No network device.
#
# Acceleration: KVM where a Debian kernel really runs under it (probed with a short boot
# that must reach the kernel's "no root" panic), otherwise QEMU's software emulation.
# Env: NRI_NODE_V2_ACCEL=auto|kvm|tcg (default auto), NRI_NODE_V2_TIMEOUT (seconds, default
# 1800), NRI_NODE_V2_MEMORY (MiB, default 4096), NRI_E2E_CACHE_DIR.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
E2E_CACHE=${NRI_E2E_CACHE_DIR:-/var/cache/nri-webhook-bridge-e2e}
ACCEL=${NRI_NODE_V2_ACCEL:-auto}
TIMEOUT=${NRI_NODE_V2_TIMEOUT:-1800}
MEMORY=${NRI_NODE_V2_MEMORY:-4096}
OUT=$REPO/.e2e/node-v2

log() { echo "node-v2: $*" >&2; }
die() {
    echo "node-v2: ERROR: $*" >&2
    exit 1
}

GUEST=$(bash "$HERE/build-guest.sh")
[[ -d $E2E_CACHE/containerd-2.1.9 ]] || die "$E2E_CACHE/containerd-2.1.9 missing: run tests/e2e/setup/install-runtimes.sh"

kvm_works() {
    [[ -r /dev/kvm && -w /dev/kvm ]] || return 1
    local dir pid verdict=1
    dir=$(mktemp -d)
    # No root device: a kernel that really runs under KVM ends in the "unable to mount root"
    # panic within seconds; one that does not makes QEMU refuse the CPU model (failed to set
    # MSR) or stop on "KVM internal error ... emulation failure". Watched, not waited out.
    qemu-system-x86_64 -accel kvm -cpu host -m 512 -nodefaults -display none -no-reboot \
        -kernel "$GUEST/vmlinuz" -append "console=ttyS0 panic=-1" \
        -serial "file:$dir/console" >"$dir/out" 2>&1 &
    pid=$!
    for _ in $(seq 1 60); do
        if grep -qs "Unable to mount root fs\|VFS: Cannot open root device" "$dir/console"; then
            verdict=0
            break
        fi
        if grep -qs "KVM internal error\|failed to set MSR\|emulation failure" "$dir/out" ||
            ! kill -0 "$pid" 2>/dev/null; then
            break
        fi
        sleep 0.5
    done
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    [[ $verdict == 0 ]] || log "KVM cannot run this kernel here ($(grep -m1 -o 'KVM internal error\|failed to set MSR[^,]*\|emulation failure' "$dir/out" || echo 'no panic seen')): software emulation"
    rm -rf "$dir"
    return $verdict
}

case $ACCEL in
auto) if kvm_works; then ACCEL=kvm; else ACCEL=tcg; fi ;;
kvm | tcg) ;;
*) die "NRI_NODE_V2_ACCEL must be auto, kvm or tcg, not '$ACCEL'" ;;
esac
if [[ $ACCEL == kvm ]]; then
    accel_args=(-accel kvm -cpu host)
else
    accel_args=(-accel tcg,thread=multi,tb-size=512 -cpu max)
fi

rm -rf "$OUT"
mkdir -p "$OUT"
if (($# == 0)); then set -- tests/node_v2; fi
printf '%s\n' "$@" >"$OUT/request"

log "booting $(basename "$GUEST") ($ACCEL, 2 vCPUs, $MEMORY MiB); console: .e2e/node-v2/console.log"
start=$SECONDS
set +e
timeout --foreground -k 10 "$TIMEOUT" qemu-system-x86_64 \
    "${accel_args[@]}" -smp 2 -m "$MEMORY" -nodefaults -display none -no-reboot \
    -kernel "$GUEST/vmlinuz" -initrd "$GUEST/initrd.img" \
    -append "root=/dev/vda rw console=ttyS0 systemd.unified_cgroup_hierarchy=1 panic=-1 quiet systemd.show_status=false" \
    -drive "file=$GUEST/rootfs.img,format=raw,if=virtio,cache=unsafe" -snapshot \
    -virtfs "local,path=$REPO,mount_tag=src,security_model=passthrough,id=src" \
    -virtfs "local,path=$E2E_CACHE,mount_tag=e2ecache,security_model=passthrough,readonly=on,id=e2ecache" \
    -nic none -serial "file:$OUT/console.log"
qemu_rc=$?
set -e
log "guest stopped after $((SECONDS - start)) s (qemu exit $qemu_rc)"
[[ -f $OUT/node.txt ]] && sed 's/^/node-v2: guest: /' "$OUT/node.txt" >&2
if [[ ! -f $OUT/exit-code ]]; then
    tail -40 "$OUT/console.log" >&2 || true
    die "the guest left no result (timeout ${TIMEOUT}s, or it did not boot): see .e2e/node-v2/console.log"
fi
rc=$(cat "$OUT/exit-code")
# pytest's closing summary line, as printed inside the guest.
grep -E '^=+ .*(passed|failed|error|no tests ran).* =+$' "$OUT/pytest.log" | tail -1 || tail -20 "$OUT/pytest.log"
if [[ $rc != 0 ]]; then
    grep -E '^(FAILED|ERROR) ' "$OUT/pytest.log" >&2 || true
    log "pytest failed in the guest (exit $rc): .e2e/node-v2/pytest.log, junit.xml, journal.log"
fi
exit "$rc"
