#!/bin/sh
# The real-kernel test bed's VM (crates/vm, `ibv-shim --vm`): the wall time
# of `ibv-shim --vm --quiet -- true`, which boots Debian's kernel in QEMU up
# to rxe0, runs one command and powers off, BENCH_VM_REPS times (default
# 3); and a real ibv_rc_pingpong over rxe0 inside, as a figure of how fast
# programs run under the emulation. No budget: it says what a CI job
# using `--vm` pays per boot.
#
# Prints a markdown section on stdout. Runs alone: `sh bench/vm.sh`.
# Always exits 0: a measurement, not a test.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
REPS=${BENCH_VM_REPS:-3}
LAUNCHER=$ROOT/target/release/ibv-shim
export LC_ALL=C
unset LD_PRELOAD 2>/dev/null || true

echo "## The real-kernel VM (ibv-shim --vm)"
echo ""
if ! command -v qemu-system-x86_64 >/dev/null 2>&1; then
    echo "Not run: qemu-system-x86_64 is missing (scripts/deps.sh installs it)."
    exit 0
fi
W=$(mktemp -d "${TMPDIR:-/tmp}/ibv-bench-vm.XXXXXX") || exit 0
trap 'rm -rf "$W"' EXIT
cd "$W" || exit 0
times=""
i=0
while [ $i -lt "$REPS" ]; do
    t0=$(date +%s%N)
    if "$LAUNCHER" --vm --quiet -- true >"$W/out" 2>&1; then
        times="$times $(( ($(date +%s%N) - t0) / 1000000 ))"
    else
        echo "A boot failed:"; echo '```'; tail -20 "$W/out"; echo '```'
        exit 0
    fi
    i=$((i + 1))
done
stats=$(echo $times | tr ' ' '\n' | sort -n | awk '{ v[NR] = $1 } END { printf "%.1f %.1f %.1f", v[int((NR + 1) / 2)] / 1000, v[1] / 1000, v[NR] / 1000 }')
set -- $stats
echo "| figure | median | range | runs |"
echo "| --- | ---: | ---: | ---: |"
echo "| boot to rxe0, one command, power-off | $1 s | $2-$3 s | $REPS |"
# A pingpong inside one VM: server and client over rxe0 (GID index 1).
cat >"$W/pp.sh" <<'PP'
ibv_rc_pingpong -g 1 -n 200 >/dev/null 2>&1 &
sleep 2
ibv_rc_pingpong -g 1 -n 200 127.0.0.1 2>&1 | awk '/usec\/iter/ { print $(NF-1) }'
wait
PP
us=$("$LAUNCHER" --vm --quiet -- sh "$W/pp.sh" 2>/dev/null | tail -1)
echo "| ibv_rc_pingpong over rxe0 in the VM (emulated CPU) | ${us:-?} usec/iter | | 1 |"
echo ""
echo "TCG (software emulation): KVM guests hung after the BIOS on the machines this was built on."
