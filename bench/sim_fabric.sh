#!/bin/sh
# The sim as a fabric between two processes: perftest's ib_write_bw
# (GB/s) beside a plain memcpy of the same message size measured in the
# same run, and the typical latency of ib_send_lat and ib_read_lat (default
# options: the extended post API, busy polling). Server and client run on
# target/sim's libibverbs alone (no shim), each pair on its own fabric.
#
# Why that baseline: ib_write_bw (one QP) registers 2 x max(size, 4 KiB)
# per side and, for a message over half its 4 KiB cycle buffer, writes
# every time from the same SIZE bytes of its buffer to the same SIZE bytes
# of the server's. So the bytes moved are a hot SIZE-byte source copied to
# a hot SIZE-byte destination, which is what memcpy_bw times (the layout,
# one page-aligned 2 x SIZE buffer or two mallocs, made no difference
# here): a transport with one copy would run at that speed; the sim's ring
# (a copy in, a copy out, across cores) is what the ratio measures.
# The baseline's jump from ~2 GB/s to ~37 GB/s between bench runs came
# with the machine (the CPU row of bench/results/latest.md: AMD EPYC up
# to 669d445, Intel Xeon from a6477d2), not with this script or
# memcpy_bw.c, unchanged since they were written.
#
# Prints a markdown section on stdout; with BENCH_BUDGETS set (bench/run.sh
# does), appends its budget verdicts there in run.sh's format. Runs alone:
# `sh bench/sim_fabric.sh`. Knobs: BENCH_SIM (the sim's directory),
# BENCH_SIM_REPS (repetitions, default 5), BENCH_SIM_SIZE (bytes, 65536),
# BENCH_SIM_BW_ITERS (10000), BENCH_SIM_LAT_ITERS (10000).
# Always exits 0: a measurement, not a test.
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SIMDIR=${BENCH_SIM:-$ROOT/target/sim}
REPS=${BENCH_SIM_REPS:-5}
SIZE=${BENCH_SIM_SIZE:-65536}
BW_ITERS=${BENCH_SIM_BW_ITERS:-10000}
LAT_ITERS=${BENCH_SIM_LAT_ITERS:-10000}
BUDGETS=${BENCH_BUDGETS:-/dev/null}
export LC_ALL=C
unset LD_PRELOAD IBV_SIM_DEVICES 2>/dev/null || true

say() { printf 'bench: %s\n' "$*" >&2; }

W=$(mktemp -d "${TMPDIR:-/tmp}/ibv-simfab.XXXXXX") || exit 0
trap 'rm -rf "$W"; rm -f /dev/shm/ibv-sim-$(id -u)-bench-$$-*' EXIT
trap 'exit 0' INT TERM

echo "## Sim fabric: perftest between two processes on ibv-sim"
echo ""
if [ ! -f "$SIMDIR/libibverbs.so.1" ] || ! command -v ib_write_bw >/dev/null 2>&1; then
    echo "Not run: no sim at $SIMDIR or no perftest."
    exit 0
fi
if ! gcc -O2 -Wall -Wextra -o "$W/memcpy_bw" "$ROOT/bench/c/memcpy_bw.c" 2>"$W/gcc"; then
    echo "Not run: gcc failed: $(cat "$W/gcc")"
    exit 0
fi

N=0
# pair PROG ARGS...: server and client of PROG on a fresh fabric; the
# client's output in $W/client (returns 1 unless both exit 0).
pair() {
    N=$((N + 1))
    _fab=bench-$$-$N
    _port=$(( 20000 + ($$ * 7 + N * 13) % 20000 ))
    env LD_LIBRARY_PATH="$SIMDIR" IBV_SIM_FABRIC=$_fab timeout 120 "$@" -p $_port >"$W/server" 2>&1 &
    _srv=$!
    _i=0
    # Wait for the server's TCP listener (perftest's address exchange).
    while [ $_i -lt 300 ] && ! grep -qi ":$(printf %04X $_port) .* 0A " /proc/net/tcp 2>/dev/null; do
        sleep 0.02; _i=$((_i + 1))
    done
    env LD_LIBRARY_PATH="$SIMDIR" IBV_SIM_FABRIC=$_fab timeout 120 "$@" -p $_port 127.0.0.1 >"$W/client" 2>&1
    _c=$?
    wait $_srv
    _s=$?
    rm -f "/dev/shm/ibv-sim-$(id -u)-$_fab"
    if [ $_c != 0 ] || [ $_s != 0 ]; then
        say "sim fabric: $* failed (client $_c, server $_s)"
        { echo "== $* (client $_c, server $_s)"; cat "$W/client" "$W/server"; } >>"$W/errors"
        return 1
    fi
}
# row HEADER-WORD COLUMN: field COLUMN of the line under the result header.
row() { awk -v h="$1" -v c="$2" 'f { print $c; exit } index($0, "#bytes") && index($0, h) { f = 1 }' "$W/client"; }
# stats FILE: "median min max" of the numbers in FILE, or "NA NA NA".
stats() {
    sort -g "$1" | awk '{ v[NR] = $1 } END { if (!NR) { print "NA NA NA"; exit }
        m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; print m, v[1], v[NR] }'
}
budget() {
    _v=$(awk -v v="$3" -v op="$4" -v l="$5" 'BEGIN { if (v == "NA") { print "NOT RUN"; exit }
        ok = op == "le" ? v <= l : v >= l; print ok ? "PASS" : "FAIL" }')
    printf '%s\t%s\t%s\t%s %s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$_v" >>"$BUDGETS"
    echo "$_v"
}

: >"$W/bw" ; : >"$W/mc"; : >"$W/ratio"; : >"$W/send"; : >"$W/read"; : >"$W/send_avg"; : >"$W/read_avg"
r=1
while [ $r -le "$REPS" ]; do
    say "sim fabric: repetition $r of $REPS"
    # Interleaved, so each figure and its baseline share the machine's noise.
    mc=$("$W/memcpy_bw" "$SIZE" "$BW_ITERS" | sed -n 's/^gbps=//p')
    if pair ib_write_bw -d mlx5_0 -s "$SIZE" -n "$BW_ITERS" --report_gbits; then
        # --report_gbits: Gb/s with 1 Gb = 1e9 bits.
        bw=$(row "BW average" 4 | awk '{ printf "%.4f\n", $1 / 8 }')
        echo "$bw" >>"$W/bw"
        [ -n "$mc" ] && awk -v a="$bw" -v b="$mc" 'BEGIN { printf "%.4f\n", a / b }' >>"$W/ratio"
    fi
    [ -n "$mc" ] && echo "$mc" >>"$W/mc"
    if pair ib_send_lat -d mlx5_0 -n "$LAT_ITERS"; then
        row t_typical 5 >>"$W/send"; row t_typical 6 >>"$W/send_avg"
    fi
    if pair ib_read_lat -d mlx5_0 -n "$LAT_ITERS"; then
        row t_typical 5 >>"$W/read"; row t_typical 6 >>"$W/read_avg"
    fi
    r=$((r + 1))
done

set -- $(stats "$W/bw"); bw=$1 bwlo=$2 bwhi=$3
set -- $(stats "$W/mc"); mc=$1 mclo=$2 mchi=$3
set -- $(stats "$W/ratio"); rt=$1 rtlo=$2 rthi=$3
set -- $(stats "$W/send"); sl=$1 sllo=$2 slhi=$3
set -- $(stats "$W/read"); rl=$1 rllo=$2 rlhi=$3
set -- $(stats "$W/send_avg"); sa=$1
set -- $(stats "$W/read_avg"); ra=$1
pct() { case $1 in NA) echo n/a ;; *) awk -v v="$1" 'BEGIN { printf "%.0f%%\n", v * 100 }' ;; esac; }

vb=$(budget simfab.write_bw "ib_write_bw between two processes >= 25% of memcpy ($SIZE B)" "$rt" ge 0.25)
vs=$(budget simfab.send_lat "ib_send_lat typical <= 10 us" "$sl" le 10)
vr=$(budget simfab.read_lat "ib_read_lat typical <= 10 us" "$rl" le 10)

echo "Server and client processes on \`target/sim\` (no shim), one fresh fabric per run, default"
echo "perftest options (extended post API, busy polling); $REPS repetitions, interleaved with the"
echo "baseline; median (min-max). Bandwidth: $SIZE-byte RDMA WRITEs, $BW_ITERS per run; the"
echo "baseline is one thread's memcpy of the same size between two buffers (perftest's footprint: it"
echo "writes the same $SIZE bytes to the same $SIZE bytes each time, so one copy is the best transport). Latency: $LAT_ITERS"
echo "round trips of 2 bytes per run. Load average now: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs."
echo ""
echo "| figure | median (min-max) | baseline | budget | verdict |"
echo "| --- | ---: | ---: | --- | --- |"
echo "| ib_write_bw, GB/s | $bw ($bwlo-$bwhi) | memcpy $mc ($mclo-$mchi) | | |"
echo "| ib_write_bw / memcpy | $(pct "$rt") ($(pct "$rtlo")-$(pct "$rthi")) | | >= 25% | $vb |"
echo "| ib_send_lat typical, us | $sl ($sllo-$slhi) (average $sa) | | <= 10 us | $vs |"
echo "| ib_read_lat typical, us | $rl ($rllo-$rlhi) (average $ra) | | <= 10 us | $vr |"
if [ -s "$W/errors" ]; then
    echo ""
    echo "Failed runs:"
    echo '```'
    tail -n 40 "$W/errors"
    echo '```'
fi
exit 0
