#!/bin/sh
# `make demo`: the examples of the verbs documentation, run under the shim
# with logging on, then a deliberately leaky program and its leak report.
# Runs on the machine's RDMA devices when it has any, else on ibv-sim.
set -eu
cd "$(dirname "$0")/.."
REL=target/release
OUT=target/demo
mkdir -p "$OUT"

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

# Real devices, or the simulated ones?
if ibv_devices >/dev/null 2>&1 && [ "$(ibv_devices 2>/dev/null | tail -n +3 | grep -c .)" -gt 0 ]; then
    say "RDMA devices found: running on the real hardware"
    SIM=""
    RUN_ENV=""
else
    say "No RDMA device on this machine: running on the simulated devices (ibv-sim, target/sim)"
    SIM="--sim"
    RUN_ENV="LD_LIBRARY_PATH=$PWD/target/sim"
fi

say "Building the seed's examples against the shim's header (include/infiniband/verbs.h), linked to the shim alone"
for ex in list_devices open_close device_guids leaky; do
    gcc -Wall -Wextra -O2 -rdynamic -Iinclude -o "$OUT/$ex" "c_examples/$ex.c" -L"$REL" -libv_shim -Wl,-rpath,"$PWD/$REL"
    echo "  $OUT/$ex"
done

for ex in list_devices open_close device_guids; do
    say "$ex, with IBV_SHIM_LOG=debug (the shim's lines start with 'ibv-shim')"
    env $RUN_ENV IBV_SHIM_LOG=debug "$OUT/$ex"
done

say "The real ibv_devinfo, unmodified, through the launcher: ibv-shim $SIM --log info -- ibv_devinfo"
"$REL/ibv-shim" $SIM --log info -- ibv_devinfo || true

say "A program that leaks: ibv-shim $SIM --fail-on-leak -- $OUT/leaky"
set +e
"$REL/ibv-shim" $SIM --fail-on-leak --report "$OUT/leaky-report.%p.json" -- "$OUT/leaky"
status=$?
set -e
echo
echo "exit status: $status (the leak exit code: a CI job would fail here)"
echo "JSON report: $(ls "$OUT"/leaky-report.*.json 2>/dev/null | tail -1)"

say "An error-path sweep: every verbs call of a program made to fail once, in turn (ibv-shim $SIM --fault-sweep)"
echo "tests/c/faults/error_paths.c sets up a PD, an MR and a CQ; when the CQ fails it returns at once:"
gcc -Wall -Wextra -O2 -o "$OUT/error_paths" tests/c/faults/error_paths.c -libverbs
set +e
"$REL/ibv-shim" $SIM --fault-sweep --sweep-json "$OUT/sweep.json" -- "$OUT/error_paths"
status=$?
set -e
echo
echo "exit status: $status (a run leaked: the table names the failed call and what its error path left)"
echo "JSON summary: $OUT/sweep.json"
