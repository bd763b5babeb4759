#!/usr/bin/env bash
# Boot the cgroup v2 + systemd guest (tests/node_v2/setup/build-guest.sh) and run pytest
# on the node_v2 tests inside it. Arguments are passed to pytest in the guest (default:
# tests/node_v2). Prints each guest's pytest summary; exits with pytest's exit code (the
# first non-zero one).
#
# The repository is shared read-write over 9p at /src (results come back through it, in
# .e2e/node-v2/); the host's e2e cache (containerd 2.1.9, images) read-only. The disk is
# opened with -snapshot, so nothing a boot does survives it. No network device.
#
# Acceleration: KVM where a Debian kernel really runs under it (probed with a short boot
# that must reach the kernel's "no root" panic), otherwise QEMU's software emulation.
# Env: NRI_NODE_V2_ACCEL=auto|kvm|tcg (default auto), NRI_NODE_V2_TIMEOUT (seconds per guest,
# default 2700), NRI_NODE_V2_MEMORY (MiB per guest, default 4096), NRI_NODE_V2_GUESTS (guests
# side by side for the whole directory, default 2), NRI_E2E_CACHE_DIR.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
E2E_CACHE=${NRI_E2E_CACHE_DIR:-/var/cache/nri-webhook-bridge-e2e}
ACCEL=${NRI_NODE_V2_ACCEL:-auto}
TIMEOUT=${NRI_NODE_V2_TIMEOUT:-2700}
MEMORY=${NRI_NODE_V2_MEMORY:-4096}
GUESTS=${NRI_NODE_V2_GUESTS:-2}
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
    # One host thread for both vCPUs: with multi-threaded TCG the guest kernel died on an
    # "Oops: int3" in the scheduler (a static key being patched while the other vCPU ran the
    # old code), twice in one run. Two guests side by side still use both host cores.
    accel_args=(-accel tcg,thread=single,tb-size=512 -cpu max)
fi

# Which tests each guest runs. Asked for the whole directory, the modules are spread over
# NRI_NODE_V2_GUESTS guests (default 2) booted side by side: a guest's Python is mostly one
# busy process on one vCPU, so two guests use this host's two cores. A module stays in one
# guest (its containerd is module-scoped); each weighs the NODE_V2_WEIGHT it states (its
# seconds in a guest divided by ten, as measured in CI), else its number of tests.
shard_args() {
    if ((GUESTS > 1)) && [[ $# == 1 && ${1%/} == tests/node_v2 ]]; then
        python3 - "$REPO" "$GUESTS" <<'PY'
import re, sys
from pathlib import Path
repo, guests = Path(sys.argv[1]), int(sys.argv[2])
weights = {}
for module in sorted((repo / "tests/node_v2").glob("test_*.py")):
    text = module.read_text()
    tests = len(re.findall(r"^(?:async )?def test_", text, re.M))
    tests += len(re.findall(r"^\s+test_\w+,?\s*$", text, re.M))  # collected from imports
    # A module's stated weight: the seconds it took in a guest, divided by ten.
    stated = re.search(r"^NODE_V2_WEIGHT = (\d+)", text, re.M)
    weights[str(module.relative_to(repo))] = int(stated.group(1)) if stated else max(tests, 1)
bins = [[0, []] for _ in range(guests)]
for module, weight in sorted(weights.items(), key=lambda kv: (-kv[1], kv[0])):
    lightest = min(bins, key=lambda b: b[0])
    lightest[0] += weight
    lightest[1].append(module)
for _, modules in bins:
    if modules:
        print(" ".join(modules))
PY
    else
        echo "$*"
    fi
}

rm -rf "$OUT"
mkdir -p "$OUT"
if (($# == 0)); then set -- tests/node_v2; fi
mapfile -t shards < <(shard_args "$@")

boot() { # boot <index> <out dir>: one guest, its results in <out dir>
    local i=$1 out=$2
    timeout --foreground -k 10 "$TIMEOUT" qemu-system-x86_64 \
        "${accel_args[@]}" -smp 2 -m "$MEMORY" -nodefaults -display none -no-reboot \
        -kernel "$GUEST/vmlinuz" -initrd "$GUEST/initrd.img" \
        -append "root=/dev/vda rw console=ttyS0 systemd.unified_cgroup_hierarchy=1 panic=-1 quiet systemd.show_status=false nri.out=${out#"$REPO"/}" \
        -drive "file=$GUEST/rootfs.img,format=raw,if=virtio,cache=unsafe" -snapshot \
        -virtfs "local,path=$REPO,mount_tag=src,security_model=passthrough,id=src" \
        -virtfs "local,path=$E2E_CACHE,mount_tag=e2ecache,security_model=passthrough,readonly=on,id=e2ecache" \
        -nic none -serial "file:$out/console.log"
    echo $? >"$out/qemu-exit"
}

start=$SECONDS
pids=()
outs=()
for i in "${!shards[@]}"; do
    out=$OUT
    ((${#shards[@]} == 1)) || out=$OUT/guest-$((i + 1))
    mkdir -p "$out"
    tr ' ' '\n' <<<"${shards[$i]}" >"$out/request"
    log "booting guest $((i + 1))/${#shards[@]}: $(basename "$GUEST") ($ACCEL, 2 vCPUs, $MEMORY MiB): ${shards[$i]}; console: ${out#"$REPO"/}/console.log"
    boot "$i" "$out" &
    pids+=($!)
    outs+=("$out")
done
wait "${pids[@]}" || true
log "guests stopped after $((SECONDS - start)) s"

final=0
for out in "${outs[@]}"; do
    where=${out#"$REPO"/}
    [[ -f $out/node.txt ]] && sed "s|^|node-v2: $where: |" "$out/node.txt" >&2
    if [[ ! -f $out/exit-code ]]; then
        tail -40 "$out/console.log" >&2 || true
        # pytest -v in the guest: the last lines name the test that was running.
        [[ -f $out/pytest.log ]] && tail -15 "$out/pytest.log" | sed "s|^|node-v2: $where: pytest: |" >&2
        log "ERROR: $where: the guest left no result (qemu exit $(cat "$out/qemu-exit" 2>/dev/null); timeout ${TIMEOUT}s, or it did not boot): see $where/console.log"
        final=1
        continue
    fi
    rc=$(cat "$out/exit-code")
    # pytest's closing summary line, as printed inside the guest.
    summary=$(grep -E '^=+ .*(passed|failed|error|no tests ran).* =+$' "$out/pytest.log" | tail -1)
    echo "${summary:-$(tail -20 "$out/pytest.log")} ($where)"
    if [[ $rc != 0 ]]; then
        grep -E '^(FAILED|ERROR) ' "$out/pytest.log" >&2 || true
        log "pytest failed in the guest (exit $rc): $where/pytest.log, junit.xml, journal.log"
        final=$rc
    fi
done
exit "$final"
