#!/bin/sh
# The cost of the data-path checks alone (section 5b of run.sh, without
# the rest of make bench), and where it goes:
#
#   sh bench/dpcheck.sh            # after make build
#
# 1. Time: REPS (default 15) interleaved repetitions of bench/c/datapath.c
#    (one signaled 8-byte RDMA WRITE from an SGE + polling its completion)
#    direct on the sim and under the shim with IBV_SHIM_CHECK=datapath;
#    the median of the paired differences (ns per WR + its completion).
# 2. Instructions (callgrind, deterministic): the same program with two
#    numbers of operations, direct and checked; the difference per
#    operation, then split: in each of the shim's post_send and poll_cq
#    wrappers, its inclusive cost minus what it spent in the provider
#    (its callees in the sim's libibverbs.so.1), per call.
#
# Knobs: BENCH_REPS, DP_ITERS (20000), DP_BATCHES (21), BENCH_SHIM, BENCH_SIM.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHIM=${BENCH_SHIM:-$ROOT/target/release/libibv_shim.so}
SIMDIR=${BENCH_SIM:-$ROOT/target/sim}
REPS=${BENCH_REPS:-15} ITERS=${DP_ITERS:-20000} BATCHES=${DP_BATCHES:-21}
W=$(mktemp -d)
[ -n "${DPCHECK_KEEP:-}" ] || trap 'rm -rf "$W"' EXIT
unset LD_PRELOAD IBV_SHIM_CHECK IBV_SHIM_LOG IBV_SHIM_TRACE IBV_SIM_DEVICES 2>/dev/null || true
gcc -O2 -Wall -o "$W/datapath" "$ROOT/bench/c/datapath.c" -libverbs -ldl
run() { # CFG ARGS...
    _c=$1; shift
    if [ "$_c" = checked ]; then
        env LD_PRELOAD="$SHIM" IBV_SHIM_CHECK=datapath LD_LIBRARY_PATH="$SIMDIR" "$@"
    else
        env LD_LIBRARY_PATH="$SIMDIR" "$@"
    fi
}

r=1
while [ "$r" -le "$REPS" ]; do
    d=$(run direct "$W/datapath" "$ITERS" "$BATCHES" sge | sed -n 's/^ns=//p')
    c=$(run checked "$W/datapath" "$ITERS" "$BATCHES" sge | sed -n 's/^ns=//p')
    echo "$d $c" >>"$W/t"
    r=$((r + 1))
done
awk 'function med(a, n,  i, j, t) { for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
     { n++; d[n] = $1; c[n] = $2; x[n] = $2 - $1 }
     END { printf "time (%d reps): direct %.1f ns, checks on %.1f ns, added %.1f ns per WR + completion (median of paired differences)\n",
           n, med(d, n), med(c, n), med(x, n) }' "$W/t"

command -v valgrind >/dev/null 2>&1 || { echo "no valgrind: no instruction counts"; exit 0; }
cg() { # CFG N -> total instructions; the profile in $W/cg.CFG.N
    run "$1" valgrind --tool=callgrind --callgrind-out-file="$W/cg.$1.$2" "$W/datapath" "$2" 1 sge 2>&1 |
        awk '/Collected :/ { print $NF }'
}
# Operations run: N / 10 + 1 warm-up, then N.
ops() { echo $(($1 / 10 + 1 + $1)); }
n1=1000 n2=2000
dd=$(($(cg direct $n2) - $(cg direct $n1)))
cc=$(($(cg checked $n2) - $(cg checked $n1)))
dops=$(($(ops $n2) - $(ops $n1)))
# wrapper FILE NAME: "calls inclusive provider" of the shim's wrapper NAME.
wrapper() {
    (cd / && callgrind_annotate --tree=calling --inclusive=yes "$1" 2>/dev/null) | awk -v name="interpose::datapath::$2 [" '
        function num(s) { gsub(",", "", s); return s + 0 }
        !seen && index($0, "*  ") && index($0, name) { on = seen = 1; incl = num($1); next }
        on && index($0, ">   ") { c = $0; sub(/.*\(/, "", c); sub(/x\).*/, "", c); gsub(",", "", c)
            if (index($0, "/libibverbs.so.1]")) { prov += num($1); if (c + 0 > calls) calls = c + 0 }; next }
        on { on = 0 }
        END { print calls + 0, incl + 0, prov + 0 }'
}
split() { # NAME -> per call, from the difference of the two runs
    set -- "$1" $(wrapper "$W/cg.checked.$n2" "$1") $(wrapper "$W/cg.checked.$n1" "$1")
    awk -v n="$1" -v c2="$2" -v i2="$3" -v p2="$4" -v c1="$5" -v i1="$6" -v p1="$7" 'BEGIN {
        printf "  %s wrapper: %.0f instructions per call beside the provider (%d calls per op)\n",
            n, ((i2 - p2) - (i1 - p1)) / (c2 - c1), (c2 - c1) / '"$dops"' }'
}
echo "instructions: direct $((dd / dops)), checks on $((cc / dops)), added $(((cc - dd) / dops)) per WR + completion"
split post_send
split poll_cq
