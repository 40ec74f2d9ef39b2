#!/bin/sh
# make bench: what the shim costs, measured against the real thing in one run.
#
# Runs the C programs of bench/c/ directly, under the shim and (for the
# device calls) under ltrace, interleaved repetition by repetition so that
# each figure and its baseline share the machine's noise; prints the table,
# and writes bench/results/latest.md and bench/results/latest.json.
# bench/README.md explains every figure and budget.
#
# Always exits 0: this is a measurement, not a test. Budget misses are listed
# at the end. Knobs (environment): BENCH_QUICK=1 (a short run to try the
# harness), BENCH_REPS, BENCH_SCALE_N, BENCH_SCALE_REPS, BENCH_CALLGRIND=0,
# BENCH_SHIM (the shim to measure), BENCH_SIM (the sim's directory).
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$ROOT/bench

# The test bed needs a private mount namespace (an overlay over /dev): run
# the whole benchmark inside one. Without it, the test-bed figures are
# skipped and the rest still runs.
if [ -z "${IBV_BENCH_NS:-}" ]; then
    if [ "$(id -u)" = 0 ]; then set -- unshare -m --propagation private; else set -- unshare -Urm --propagation private; fi
    if "$@" true 2>/dev/null; then
        export IBV_BENCH_NS=1
        exec "$@" sh "$0"
    fi
    IBV_BENCH_NS=none
fi

# ---------------------------------------------------------------- settings
QUICK=${BENCH_QUICK:-0}
if [ "$QUICK" = 1 ]; then
    REPS=${BENCH_REPS:-3} SCALE_N=${BENCH_SCALE_N:-100000} SCALE_REPS=${BENCH_SCALE_REPS:-1}
    DEV_ITERS=50000 DEV_BATCHES=9 DBG_ITERS=1000 LIST_ITERS=20 LT_REPS=1
    PAIR_ITERS=1000 PAIR_BATCHES=9 THR_MS=100 THR_REPS=3 DP_ITERS=5000 DP_BATCHES=9 START_RUNS=40
else
    REPS=${BENCH_REPS:-15} SCALE_N=${BENCH_SCALE_N:-1000000} SCALE_REPS=${BENCH_SCALE_REPS:-5}
    DEV_ITERS=200000 DEV_BATCHES=21 DBG_ITERS=2000 LIST_ITERS=40 LT_REPS=3
    PAIR_ITERS=2000 PAIR_BATCHES=21 THR_MS=250 THR_REPS=9 DP_ITERS=20000 DP_BATCHES=21 START_RUNS=300
fi
LT_NAME_ITERS=300 LT_LIST_ITERS=5
CALLGRIND=${BENCH_CALLGRIND:-1}
SHIM=${BENCH_SHIM:-$ROOT/target/release/libibv_shim.so}
SIMDIR=${BENCH_SIM:-$ROOT/target/sim}
OUT=$BENCH/results

# Nothing from the caller's environment may change what is measured.
unset IBV_SHIM_LOG IBV_SHIM_LOG_FILE IBV_SHIM_LIBRARY IBV_SHIM_REPORT IBV_SHIM_LEAK_EXITCODE \
    IBV_SHIM_SUPPRESS IBV_SHIM_BACKTRACE LD_PRELOAD LD_LIBRARY_PATH SYSFS_PATH IBV_SIM_DEVICES \
    RDMAV_DRIVERS IBV_DRIVERS VERBS_LOG_LEVEL VERBS_LOG_FILE 2>/dev/null || true
export LC_ALL=C

W=$(mktemp -d "${TMPDIR:-/tmp}/ibv-bench.XXXXXX") || exit 0
FS=$W/fs
cleanup() {
    umount "$FS" 2>/dev/null
    umount "$W/dev" 2>/dev/null
    rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 0' INT TERM
mkdir -p "$FS" "$W/bin" "$W/md" "$OUT"
RAW=$W/raw ERRLOG=$W/errors.log BUDGETS=$W/budgets JFIGS=$W/figures NOTRUN=$W/notrun
: >"$RAW"; : >"$ERRLOG"; : >"$BUDGETS"; : >"$JFIGS"; : >"$NOTRUN"
T_START=$(date +%s)

say() { printf 'bench: %s\n' "$*" >&2; }

# Logs and reports go to a tmpfs (a temp dir when there is no namespace).
FS_KIND="temp dir ($(df -PT "$W" 2>/dev/null | awk 'NR==2 {print $2}'))"
if [ "$IBV_BENCH_NS" = 1 ] && mount -t tmpfs -o size=50% tmpfs "$FS" 2>/dev/null; then FS_KIND=tmpfs; fi

# ------------------------------------------------------------ numbers, text
# st MODE FIG CFG KEY [BASE]: statistics over the raw samples (lib/stat.awk).
st() { awk -v mode="$1" -v fig="$2" -v cfg="$3" -v key="$4" -v base="${5:-}" -f "$BENCH/lib/stat.awk" "$RAW"; }
# calc EXPR VARS...: awk arithmetic on numbers; NA when any input is NA.
calc() {
    _e=$1; shift
    for _v in "$@"; do [ "$_v" = NA ] || [ -z "$_v" ] && { echo NA; return; }; done
    awk -v a="${1:-0}" -v b="${2:-0}" -v c="${3:-0}" -v d="${4:-0}" "BEGIN { x = $_e; print x }"
}
# f VALUE DIGITS: fixed-point, or "n/a".
f() { case $1 in NA|'') echo "n/a" ;; *) awk -v v="$1" -v d="$2" 'BEGIN { printf "%.*f\n", d, v }' ;; esac; }
# sf VALUE DIGITS: signed fixed-point.
sf() { case $1 in NA|'') echo "n/a" ;; *) awk -v v="$1" -v d="$2" 'BEGIN { printf "%+.*f\n", d, v }' ;; esac; }
# j VALUE: a JSON number, or null.
j() { case $1 in NA|'') echo null ;; *) awk -v v="$1" 'BEGIN { printf "%.6g\n", v }' ;; esac; }
# human ns: ns, us or ms with 3 significant digits.
t() {
    case $1 in NA|'') echo "n/a"; return ;; esac
    awk -v v="$1" 'BEGIN { a = v < 0 ? -v : v
        if (a >= 1e9) printf "%.3g s\n", v / 1e9; else if (a >= 1e6) printf "%.3g ms\n", v / 1e6
        else if (a >= 1e3) printf "%.3g us\n", v / 1e3; else printf "%.3g ns\n", v }'
}
st_t() { _x=$(t "$1"); case $1 in NA|''|-*) echo "$_x" ;; *) echo "+$_x" ;; esac; }
x() { case $1 in NA|'') echo "n/a" ;; *) awk -v v="$1" 'BEGIN { printf (v >= 100 ? "%.0fx\n" : "%.2fx\n"), v }' ;; esac; }

md() { printf '%s\n' "$*" >>"$W/md/$SECTION"; }

# budget ID TEXT VALUE OP LIMIT [NOISE]: judges one figure (OP: le, lt, ge,
# within = |VALUE-1| <= LIMIT). With NOISE (for le): a value over the limit
# by less than the noise is UNRESOLVED (this run cannot tell); for ge, NOISE
# is the ceiling the machine allowed: a miss with a ceiling under LIMIT+0.1
# is UNRESOLVED. Prints the verdict.
budget() {
    _v=$(awk -v v="$3" -v op="$4" -v l="$5" -v n="${6:-0}" 'BEGIN {
        if (v == "NA" || v == "") { print "NOT RUN"; exit }
        if (op == "le") ok = v <= l; else if (op == "lt") ok = v < l
        else if (op == "ge") ok = v >= l; else { d = v - 1; ok = (d < 0 ? -d : d) <= l }
        if (!ok && op == "le" && n != "NA" && v - l <= n) { print "UNRESOLVED"; exit }
        if (!ok && op == "ge" && n != "NA" && n != 0 && n < l + 0.1) { print "UNRESOLVED"; exit }
        print ok ? "PASS" : "FAIL" }')
    printf '%s\t%s\t%s\t%s %s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$_v" >>"$BUDGETS"
    echo "$_v"
}

# jfig ID SECTION LABEL UNIT VALUE BASELINE ADDED RATIO SAMPLES: one figure
# of latest.json (numbers or NA; SAMPLES a comma list or NA).
jfig() {
    _s=$9; [ "$_s" = NA ] && _s="" 
    printf '{"id": "%s", "section": %s, "label": "%s", "unit": "%s", "value": %s, "baseline": %s, "added": %s, "ratio": %s, "samples": [%s]}\n' \
        "$1" "$2" "$3" "$4" "$(j "$5")" "$(j "$6")" "$(j "$7")" "$(j "$8")" "$_s" >>"$JFIGS"
}

notrun() { printf '%s\t%s\n' "$1" "$2" >>"$NOTRUN"; say "NOT RUN: $1: $2"; }

# run_rec FIG CFG REP LIB PROGRAM ARGS...: runs one measurement and adds its
# "key=value" lines to the raw samples as "FIG CFG REP key value".
# CFG: direct | off (shim, IBV_SHIM_LOG=off) | debug (shim, debug to a file)
#      | shim (shim, default settings) | checked (IBV_SHIM_CHECK=datapath)
#      | inflight (IBV_SHIM_CHECK=inflight, fingerprints only: the sim keeps
#      no sources) | exact (inflight with the sim keeping what each send
#      read, as by default) | report (shim, log and JSON report to
#      files) | ltrace. LIB: tb (real libibverbs on the test bed) | sim.
run_rec() {
    _fig=$1 _cfg=$2 _rep=$3 _lib=$4; shift 4
    case $_cfg in
        off) set -- env LD_PRELOAD="$SHIM" IBV_SHIM_LOG=off "$@" ;;
        debug) set -- env LD_PRELOAD="$SHIM" IBV_SHIM_LOG=debug IBV_SHIM_LOG_FILE="$FS/debug.log" "$@" ;;
        shim) set -- env LD_PRELOAD="$SHIM" "$@" ;;
        checked) set -- env LD_PRELOAD="$SHIM" IBV_SHIM_CHECK=datapath "$@" ;;
        inflight) set -- env LD_PRELOAD="$SHIM" IBV_SHIM_CHECK=inflight IBV_SIM_WITNESS=off "$@" ;;
        exact) set -- env LD_PRELOAD="$SHIM" IBV_SHIM_CHECK=inflight "$@" ;;
        report) set -- env LD_PRELOAD="$SHIM" IBV_SHIM_LOG_FILE="$FS/report.%p.log" IBV_SHIM_REPORT="$FS/report.%p.json" "$@" ;;
        ltrace) set -- ltrace -e 'ibv_*' -o "$FS/ltrace.out" "$@" ;;
    esac
    case $_lib in
        tb) set -- env SYSFS_PATH="$W/sys" "$@" ;;
        sim) set -- env LD_LIBRARY_PATH="$SIMDIR" "$@" ;;
    esac
    if "$@" >"$W/out" 2>"$W/err" && ! grep -q '^error=' "$W/out"; then
        awk -F= -v p="$_fig $_cfg $_rep" 'NF == 2 && $1 ~ /^[A-Za-z0-9_]+$/ { print p, $1, $2 }' "$W/out" >>"$RAW"
        return 0
    fi
    { echo "== $_fig/$_cfg rep $_rep: $*"; cat "$W/out" "$W/err"; } >>"$ERRLOG"
    return 1
}

# cg_ir LIB CFG PROGRAM ARGS...: instructions executed (callgrind's total).
cg_ir() {
    _lib=$1 _cfg=$2; shift 2
    case $_cfg in
        off) set -- env LD_PRELOAD="$SHIM" IBV_SHIM_LOG=off "$@" ;;
        debug) set -- env LD_PRELOAD="$SHIM" IBV_SHIM_LOG=debug IBV_SHIM_LOG_FILE="$FS/cg.log" "$@" ;;
        shim) set -- env LD_PRELOAD="$SHIM" "$@" ;;
    esac
    case $_lib in
        tb) set -- env SYSFS_PATH="$W/sys" "$@" ;;
        sim) set -- env LD_LIBRARY_PATH="$SIMDIR" "$@" ;;
    esac
    "$@" 2>&1 >/dev/null | awk '/Collected :/ { print $NF; found = 1 } END { if (!found) print "NA" }'
    rm -f "$FS/cg.log"
}
VG="valgrind --tool=callgrind --callgrind-out-file=/dev/null"

# ------------------------------------------------------------------- build
say "building the C programs (gcc -O2, real verbs.h, -libverbs) in $W/bin"
for p in device pairs scale close threads datapath startup; do
    gcc -O2 -Wall -Wextra -pthread -o "$W/bin/$p" "$BENCH/c/$p.c" -libverbs -ldl 2>>"$ERRLOG" ||
        say "gcc failed for $p.c (see below)"
done
gcc -O2 -Wall -Wextra -o "$W/bin/spawn" "$BENCH/c/spawn.c" 2>>"$ERRLOG"
gcc -O2 -Wall -Wextra -o "$W/bin/cm_forward" "$BENCH/c/cm_forward.c" -lrdmacm -libverbs 2>>"$ERRLOG" ||
    say "gcc failed for cm_forward.c (see below)"
B=$W/bin

# ------------------------------------------------------------ what can run
HAVE_SHIM=0 HAVE_TB=0 HAVE_SIM=0 HAVE_DP=0 HAVE_AUDIT=0 HAVE_LTRACE=0 HAVE_CG=0
SIM_WHY="" AUDIT_WHY=""
[ -f "$SHIM" ] && HAVE_SHIM=1
command -v ltrace >/dev/null 2>&1 && HAVE_LTRACE=1
[ "$CALLGRIND" = 1 ] && command -v valgrind >/dev/null 2>&1 && HAVE_CG=1

if [ "$IBV_BENCH_NS" = 1 ]; then
    . "$BENCH/lib/testbed.sh"
    testbed_tree "$W/sys"
    if testbed_dev "$W/dev" 2>>"$ERRLOG" && run_rec probe tb 1 tb "$B/device" name 10 1; then
        HAVE_TB=1
    else
        TB_WHY="the fake-sysfs test bed did not list devices"
    fi
else
    TB_WHY="no private mount namespace (unshare -m failed: run as root)"
fi

if [ ! -f "$SIMDIR/libibverbs.so.1" ]; then
    SIM_WHY="no sim at $SIMDIR/libibverbs.so.1"
elif run_rec probe sim 1 sim "$B/pairs" 10 1; then
    HAVE_SIM=1
    if run_rec probe sim 1 sim "$B/datapath" 100 1; then HAVE_DP=1; else
        DP_WHY="the sim does not run the data path program: $(tail -n 2 "$W/err" | tr '\n' ' ')"
    fi
else
    SIM_WHY="the sim cannot open a device and create/destroy a PD, MR, CQ and QP: $(tail -n 2 "$W/err" | tr '\n' ' ')"
fi

# Is the leak audit in the shim? A program that leaks 1000 MRs must get a report.
if [ "$HAVE_SHIM" = 1 ] && [ "$HAVE_SIM" = 1 ]; then
    rm -f "$FS"/report.*
    if run_rec probe report 1 sim "$B/scale" 1000 10 1 && [ -n "$(cat "$FS"/report.*.json 2>/dev/null)" ]; then
        HAVE_AUDIT=1
    else
        AUDIT_WHY="a program leaking 1000 MRs under the shim got no JSON report (IBV_SHIM_REPORT): the audit is not in this shim; the create/destroy figures measure plain forwarding"
    fi
    rm -f "$FS/report.json" "$FS/report.log"
fi
[ "$HAVE_SHIM" = 1 ] || { say "no shim at $SHIM (make build first); nothing to measure"; }
say "shim=$HAVE_SHIM testbed=$HAVE_TB sim=$HAVE_SIM datapath=$HAVE_DP audit=$HAVE_AUDIT ltrace=$HAVE_LTRACE callgrind=$HAVE_CG"

# ============================================ 1. device calls (real library)
SECTION=1
md "## 1. Device calls on the real libibverbs (fake-sysfs test bed: rxe0, mlx5_0, mlx4_0)"
md ""
if [ "$HAVE_SHIM" = 1 ] && [ "$HAVE_TB" = 1 ]; then
    say "1. device calls: $REPS repetitions x {direct, shim log off, shim debug to a file (, ltrace in $LT_REPS of them)}"
    r=1
    while [ $r -le "$REPS" ]; do
        for op in name rot guid list; do
            if [ $op = list ]; then it=$LIST_ITERS dit=$LIST_ITERS b=11; else it=$DEV_ITERS dit=$DBG_ITERS b=$DEV_BATCHES; fi
            run_rec "dev_$op" direct $r tb "$B/device" $op $it $b
            run_rec "dev_$op" off $r tb "$B/device" $op $it $b
            rm -f "$FS/debug.log"
            run_rec "dev_$op" debug $r tb "$B/device" $op $dit 11 &&
                echo "dev_$op debug $r log_lines $(wc -l <"$FS/debug.log" 2>/dev/null || echo 0)" >>"$RAW"
            rm -f "$FS/debug.log"
            # ltrace in the first LT_REPS repetitions, next to the debug run
            # it is compared with: its cost per call moves a lot with the
            # machine's state (waking the tracer), so the ratio is paired.
            if [ "$HAVE_LTRACE" = 1 ] && [ $r -le "$LT_REPS" ] && [ $op != rot ]; then
                if [ $op = list ]; then lit=$LT_LIST_ITERS; else lit=$LT_NAME_ITERS; fi
                run_rec "dev_$op" ltrace $r tb "$B/device" $op $lit 3 &&
                    echo "dev_$op ltrace $r lt_lines $(grep -c 'ibv_' "$FS/ltrace.out" 2>/dev/null || echo 0)" >>"$RAW"
                rm -f "$FS/ltrace.out"
            fi
        done
        r=$((r + 1))
    done
    [ "$HAVE_LTRACE" = 1 ] || notrun "1 (ltrace)" "ltrace is not installed"
    # Per repetition: ltrace's added cost over debug logging's.
    awk '$4 == "ns" && $1 ~ /^dev_/ { v[$1, $2, $3] = $5; figs[$1] = 1; reps[$3] = 1 }
        END { for (f in figs) for (r in reps)
            if ((f, "ltrace", r) in v && (f, "debug", r) in v && (f, "direct", r) in v && v[f, "debug", r] > v[f, "direct", r])
                print f, "ltrace", r, "over_debug", (v[f, "ltrace", r] - v[f, "direct", r]) / (v[f, "debug", r] - v[f, "direct", r]) }' \
        "$RAW" >>"$RAW.tmp" && cat "$RAW.tmp" >>"$RAW" && rm -f "$RAW.tmp"

    # Instructions per call (callgrind): two run lengths, the difference
    # divided by the difference in calls cancels start-up and set-up.
    if [ "$HAVE_CG" = 1 ]; then
        say "1. instruction counts (callgrind)"
        for op in name rot guid list; do
            if [ $op = list ]; then n1=20 n2=40; else n1=1000 n2=11000; fi
            c1=$((n1 + (n1 > 10 ? n1 / 10 : 1))) c2=$((n2 + (n2 > 10 ? n2 / 10 : 1)))
            for cfg in direct off debug; do
                i1=$(cg_ir tb $cfg $VG "$B/device" $op $n1 1)
                i2=$(cg_ir tb $cfg $VG "$B/device" $op $n2 1)
                echo "dev_$op $cfg 1 ir $(calc '(b - a) / c' "$i1" "$i2" $((c2 - c1)))" >>"$RAW"
            done
        done
    fi

    md "Per call (list + free: per pair of calls, so its budgets double). Each figure is the median"
    md "over $REPS runs of each run's median batch; \"added\" is the median of the per-run differences"
    md "against direct (± their median absolute deviation: the run-to-run noise). ltrace runs in the"
    md "first $LT_REPS repetitions, each next to its debug run; \"ltrace ÷ debug\" is the median of those"
    md "pairs' ratios. Instructions per call from callgrind (deterministic: no spread), in brackets"
    md "what the configuration adds to direct. \"rotating device\" passes each device of the list in"
    md "turn (the direct run does the same loop, so its cost cancels)."
    md ""
    md "| call | configuration | time | added vs direct | x direct | instructions | budget | verdict |"
    md "| --- | --- | ---: | ---: | ---: | ---: | --- | --- |"
    for op in name rot guid list; do
        fig=dev_$op
        case $op in
            name) call="ibv_get_device_name (list[0])" k=1 ;;
            rot) call="ibv_get_device_name (rotating device)" k=1 ;;
            guid) call=ibv_get_device_guid k=1 ;;
            list) call="ibv_get_device_list + ibv_free_device_list" k=2 ;;
        esac
        d=$(st med $fig direct ns) dir=$(st med $fig direct ir)
        md "| $call | direct | $(t "$d") | | | $(f "$dir" 0) | | |"
        jfig "$fig.direct" 1 "$call, direct" ns "$d" NA NA NA "$(st list $fig direct ns)"
        for cfg in off debug ltrace; do
            v=$(st med $fig $cfg ns) a=$(st diff $fig $cfg ns direct) rt=$(st ratio $fig $cfg ns direct)
            noise=$(st dmad $fig $cfg ns direct) ir=$(st med $fig $cfg ir)
            # A per-call count is a whole number: the fraction left is fixed
            # costs that the two run lengths did not quite cancel.
            ira=$(calc 'int(b - a + (b >= a ? 0.5 : -0.5))' "$dir" "$ir")
            case $cfg in
                off) label="shim, IBV_SHIM_LOG=off" lim=$((5 * k)) btxt="<= $((5 * k)) ns added"
                    # The getter at the floor, wherever the device is in the list.
                    case $op in name | rot) lim=2.5 btxt="<= 2.5 ns and <= 15 instructions added" ;; esac ;;
                debug) label="shim, debug log to a file" lim=$((1000 * k)) btxt="<= $((1000 * k)) ns added" ;;
                ltrace) label="ltrace -e 'ibv_*'" lim="" btxt="" ;;
            esac
            verdict=""
            if [ -n "$lim" ]; then
                verdict=$(budget "$fig.$cfg" "$call: $label adds <= $(t $lim) per $([ $k = 2 ] && echo pair || echo call)" "$a" le "$lim" "$noise")
            fi
            if [ $cfg = off ] && { [ $op = name ] || [ $op = rot ]; }; then
                # callgrind is deterministic: no noise margin.
                verdict="$verdict; $(budget "$fig.off_ir" "$call: $label adds <= 15 instructions per call" "$ira" le 15)"
                jfig "$fig.off_ir" 1 "$call, $label, instructions added per call" instructions "$ir" "$dir" "$ira" NA NA
            fi
            [ "$v" = NA ] && [ -z "$verdict" ] && continue
            addtxt="$(st_t "$a")"
            [ "$noise" != NA ] && [ "$cfg" != ltrace ] && addtxt="$addtxt ± $(t "$noise")"
            irtxt=""; [ "$ir" != NA ] && irtxt="$(f "$ir" 0) ($(sf "$ira" 0))"
            md "| $call | $label | $(t "$v") | $addtxt | $(x "$rt") | $irtxt | $btxt | $verdict |"
            jfig "$fig.$cfg" 1 "$call, $label" ns "$v" "$d" "$a" "$rt" "$(st list $fig $cfg ns)"
        done
        # ltrace against debug logging, on the added cost, paired by repetition
        # (not for the rotating device: the same call as list[0]).
        [ $op = rot ] && continue
        rr=$(st med $fig ltrace over_debug)
        verdict=$(budget "$fig.vs_ltrace" "$call: debug logging >= 200x cheaper than ltrace (added cost)" "$rr" ge 200)
        md "| $call | ltrace ÷ debug logging (added cost) | $(x "$rr") | | | | >= 200x | $verdict |"
        jfig "$fig.ltrace_over_debug" 1 "$call, ltrace added / debug added" x "$rr" NA NA NA "$(st list $fig ltrace over_debug)"
    done
    ll=$(st med dev_name debug log_lines) lc=$(calc 'a / ((b / 10 > 1 ? b / 10 : 1) + b * 11)' "$ll" "$DBG_ITERS")
    md ""
    ltl=$(st med dev_name ltrace lt_lines) ltc=$(calc 'a / (b / 10 + b * 3)' "$ltl" "$LT_NAME_ITERS")
    md "Checks: the debug runs wrote $(f "$lc" 2) log lines per ibv_get_device_name call (log file on a $FS_KIND);"
    md "ltrace traced $(f "$ltc" 2) calls per ibv_get_device_name call (its output on the same $FS_KIND)."
else
    notrun 1 "${TB_WHY:-no shim}"
    md "Not run: ${TB_WHY:-no shim at $SHIM}."
fi

# ===================================================== 2. create/destroy pairs
SECTION=2
md "## 2. Create/destroy pairs on the sim"
md ""
if [ "$HAVE_SHIM" = 1 ] && [ "$HAVE_SIM" = 1 ]; then
    say "2. create/destroy pairs: $REPS repetitions x {direct, shim}"
    r=1
    while [ $r -le "$REPS" ]; do
        run_rec pairs direct $r sim "$B/pairs" $PAIR_ITERS $PAIR_BATCHES all ab
        run_rec pairs shim $r sim "$B/pairs" $PAIR_ITERS $PAIR_BATCHES all ab
        r=$((r + 1))
    done
    if [ "$HAVE_CG" = 1 ]; then
        say "2. instruction counts (callgrind)"
        for k in pd mr cq qp; do
            for cfg in direct shim; do
                i1=$(cg_ir sim $cfg $VG "$B/pairs" 200 1 $k)
                i2=$(cg_ir sim $cfg $VG "$B/pairs" 1200 1 $k)
                # pairs runs ITERS / 4 + 1 warm-up pairs before its batch:
                # 251 and 1501 pairs in all, 1250 apart.
                echo "pairs $cfg 1 ir_$k $(calc '(b - a) / 1250' "$i1" "$i2")" >>"$RAW"
            done
        done
    fi
    [ "$HAVE_AUDIT" = 1 ] && tr="tracking on" || tr="AUDIT NOT IN THIS SHIM: forwarding only"
    md "Per pair, shim with default settings ($tr). Median over $REPS runs of each run's median"
    md "batch; added = the median of the per-run differences (± their median absolute deviation)."
    md "Same process (A/B): inside each shim run, every batch through the shim is followed by the"
    md "same batch through pointers to the sim's own functions (which the shim never sees); the"
    md "median of those per-batch differences, over the runs. The control is the same A/B without"
    md "the shim (should be 0). A verdict the processes leave UNRESOLVED is decided by the A/B figure."
    md ""
    md "| pair | direct | shim | added | x direct | added, same process (A/B) | A/B control | instructions direct / shim | budget | verdict |"
    md "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"
    for k in pd mr cq qp; do
        case $k in
            pd) lbl="ibv_alloc_pd + ibv_dealloc_pd" ;; mr) lbl="ibv_reg_mr + ibv_dereg_mr" ;;
            cq) lbl="ibv_create_cq + ibv_destroy_cq" ;; qp) lbl="ibv_create_qp + ibv_destroy_qp" ;;
        esac
        d=$(st med pairs direct $k) s=$(st med pairs shim $k) a=$(st diff pairs shim $k direct)
        rt=$(st ratio pairs shim $k direct) noise=$(st dmad pairs shim $k direct)
        ab=$(st med pairs shim ${k}_ab_added) abn=$(st med pairs shim ${k}_ab_mad) abc=$(st med pairs direct ${k}_ab_added)
        i1=$(st med pairs direct ir_$k) i2=$(st med pairs shim ir_$k)
        verdict=$(budget "pairs.$k" "$lbl: tracking adds <= 100 ns per pair" "$a" le 100 "$noise")
        if [ "$verdict" = UNRESOLVED ] && [ "$ab" != NA ]; then
            sed -i '$d' "$BUDGETS"
            verdict="$(budget "pairs.$k" "$lbl: tracking adds <= 100 ns per pair (same-process A/B)" "$ab" le 100) (A/B)"
        fi
        btxt="<= 100 ns added"
        if [ $k = pd ]; then
            # The PD pair's tracking in instructions (callgrind: no spread), a
            # figure without a verdict: its old budget of 300 is retired
            # (BENCHMARKS.md, "The misses"); tests/hotpath.rs guards it.
            ia=$(calc 'int(b - a + 0.5)' "$i1" "$i2")
            jfig pairs.pd.ir_added 2 "$lbl, instructions added per pair" instructions "$i2" "$i1" "$ia" NA NA
        fi
        md "| $lbl | $(t "$d") | $(t "$s") | $(st_t "$a") ± $(t "$noise") | $(x "$rt") | $(st_t "$ab") ± $(t "$abn") | $(st_t "$abc") | $(f "$i1" 0) / $(f "$i2" 0) | $btxt | $verdict |"
        jfig "pairs.$k.direct" 2 "$lbl, direct" ns "$d" NA NA NA "$(st list pairs direct $k)"
        jfig "pairs.$k.shim" 2 "$lbl, shim" ns "$s" "$d" "$a" "$rt" "$(st list pairs shim $k)"
        jfig "pairs.$k.ab_added" 2 "$lbl, added by the shim within one process (A/B)" ns "$ab" NA "$ab" NA "$(st list pairs shim ${k}_ab_added)"
    done
else
    why=${SIM_WHY:-no shim}
    notrun 2 "$why"
    md "Not run: $why."
fi

# ==================================================================== 3. scale
SECTION=3
md "## 3. Scale: $SCALE_N live MRs on one PD"
md ""
if [ "$HAVE_SHIM" = 1 ] && [ "$HAVE_SIM" = 1 ]; then
    say "3. scale: $SCALE_N MRs, $SCALE_REPS repetitions x {direct, shim with log and JSON report to files}"
    r=1
    while [ $r -le "$SCALE_REPS" ]; do
        run_rec scale direct $r sim "$B/scale" "$SCALE_N" 100 31
        rm -f "$FS"/report.*
        if run_rec scale report $r sim "$B/scale" "$SCALE_N" 100 31 ab; then
            echo "scale report $r log_bytes $(cat "$FS"/report.*.log 2>/dev/null | wc -c)" >>"$RAW"
            echo "scale report $r json_bytes $(cat "$FS"/report.*.json 2>/dev/null | wc -c)" >>"$RAW"
            echo "scale report $r json_mrs $(cat "$FS"/report.*.json 2>/dev/null | grep -o '"kind": *"mr"' | wc -l)" >>"$RAW"
        fi
        rm -f "$FS"/report.*
        r=$((r + 1))
    done
    live=$(st med scale report live)
    same=$(st med scale direct same_buffer)
    [ "$same" = 1 ] && buf="the same 64-byte buffer registered each time" || buf="distinct 64-byte slices of one buffer"
    [ "$HAVE_AUDIT" = 1 ] && tr="" || tr=" AUDIT NOT IN THIS SHIM: forwarding only."
    md "MRs: $buf. Median over $SCALE_REPS runs.$tr"
    md ""
    md "| | direct | shim | added | budget | verdict |"
    md "| --- | ---: | ---: | ---: | --- | --- |"
    d=$(st med scale direct rss_live_kb) s=$(st med scale report rss_live_kb) a=$(st diff scale report rss_live_kb direct)
    per=$(calc 'a * 1024 / b' "$a" "$SCALE_N")
    noise=$(calc 'a * 1024 / b' "$(st dmad scale report rss_live_kb direct)" "$SCALE_N")
    verdict=$(budget scale.bytes_per_object "extra memory per tracked object <= 80 bytes ($SCALE_N live)" "$per" le 80)
    md "| peak RSS with $SCALE_N MRs live | $(f "$(calc 'a / 1024' "$d")" 1) MiB | $(f "$(calc 'a / 1024' "$s")" 1) MiB | $(f "$(calc 'a / 1024' "$a")" 1) MiB | | |"
    md "| extra memory per tracked object, $SCALE_N live | | | $(f "$per" 1) ± $(f "$noise" 1) bytes | <= 80 bytes | $verdict |"
    # The same at 100,000 live: the peak RSS the program printed on its way up.
    if [ "$SCALE_N" -gt 100000 ]; then
        a1=$(st diff scale report rss_kb_100000 direct)
        per1=$(calc 'a * 1024 / 100000' "$a1")
        noise1=$(calc 'a * 1024 / 100000' "$(st dmad scale report rss_kb_100000 direct)")
        verdict1=$(budget scale.bytes_per_object_100k "extra memory per tracked object <= 80 bytes (100000 live)" "$per1" le 80)
        md "| extra memory per tracked object, 100000 live | | | $(f "$per1" 1) ± $(f "$noise1" 1) bytes | <= 80 bytes | $verdict1 |"
        jfig scale.bytes_per_object_100k 3 "extra memory per tracked object, 100000 live" bytes "$per1" NA NA NA NA
        # The figure above charges the shim's fixed footprint (its code
        # pages, static tables: ~0.75 MiB whatever the count) to the objects;
        # the growth from 1,000 to 100,000 live leaves that out. Shown for
        # the reader; the verdict stays the figure above's.
        g1=$(calc 'a - b' "$a1" "$(st diff scale report rss_kb_1000 direct)")
        perg=$(calc 'a * 1024 / 99000' "$g1")
        md "| same, growth from 1000 to 100000 live (the shim's fixed footprint left out) | | | $(f "$perg" 1) bytes | (information) | |"
        jfig scale.bytes_per_object_growth_100k 3 "extra memory per tracked object, growth 1000 -> 100000 live" bytes "$perg" NA NA NA NA
    fi
    jfig scale.rss_live_kb 3 "peak RSS with $SCALE_N MRs live (KiB)" KiB "$s" "$d" "$a" NA "$(st list scale report rss_live_kb)"
    jfig scale.bytes_per_object 3 "extra memory per tracked object" bytes "$per" NA NA NA NA
    d=$(st med scale direct rss_peak_kb) s=$(st med scale report rss_peak_kb)
    md "| whole-life peak RSS (with the exit report) | $(f "$(calc 'a / 1024' "$d")" 1) MiB | $(f "$(calc 'a / 1024' "$s")" 1) MiB | $(f "$(calc '(b - a) / 1024' "$d" "$s")" 1) MiB | | |"
    jfig scale.rss_peak_kb 3 "whole-life peak RSS (KiB)" KiB "$s" "$d" "$(calc 'b - a' "$d" "$s")" NA NA
    md ""
    md "Time per create and per destroy with N objects live: median of 31 rounds of \"destroy 100"
    md "live MRs, create 100\". Newest-first victims stay in cache and show the algorithm; random"
    md "victims make every lookup in a large table a cache miss and show the memory hierarchy too."
    md ""
    md "| live | victims | create direct | create shim | added | destroy direct | destroy shim | added |"
    md "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
    for o in lifo rand; do
        [ $o = lifo ] && ol="newest first" || ol=random
        at=1000
        while [ "$at" -le "$SCALE_N" ]; do
            cd_=$(st med scale direct create_${o}_ns_$at) cs=$(st med scale report create_${o}_ns_$at)
            dd=$(st med scale direct destroy_${o}_ns_$at) ds=$(st med scale report destroy_${o}_ns_$at)
            md "| $at | $ol | $(t "$cd_") | $(t "$cs") | $(st_t "$(calc 'b - a' "$cd_" "$cs")") | $(t "$dd") | $(t "$ds") | $(st_t "$(calc 'b - a' "$dd" "$ds")") |"
            jfig "scale.create_$o.$at" 3 "create at $at live ($ol)" ns "$cs" "$cd_" "$(calc 'b - a' "$cd_" "$cs")" "$(calc 'b / a' "$cd_" "$cs")" "$(st list scale report create_${o}_ns_$at)"
            jfig "scale.destroy_$o.$at" 3 "destroy at $at live ($ol)" ns "$ds" "$dd" "$(calc 'b - a' "$dd" "$ds")" "$(calc 'b / a' "$dd" "$ds")" "$(st list scale report destroy_${o}_ns_$at)"
            last=$at
            at=$((at * 10))
        done
    done
    md ""
    md "Flatness, $last live against 1000 live. The sim's own time grows with its table sizes"
    md "(caches), so the budget is on what the shim adds, measured inside the shim runs (A/B): at"
    md "each size, 31 rounds of \"register 100 MRs, deregister them\" through the shim and through"
    md "the sim's own functions, the median of the per-round differences. Budget: added at $last at"
    md "most twice the added at 1000 (added times under 20 ns count as 20 ns). The same from the"
    md "separate processes above is shown for comparison (noisier)."
    md ""
    md "| operation | direct $last/1k | shim $last/1k | added at 1k (A/B) | added at $last (A/B) | added, separate processes (1k / $last) | budget | verdict |"
    md "| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |"
    for op in create destroy; do
        key1=${op}_lifo_ns_1000 keyn=${op}_lifo_ns_$last
        rd=$(calc 'b / a' "$(st med scale direct $key1)" "$(st med scale direct $keyn)")
        rs=$(calc 'b / a' "$(st med scale report $key1)" "$(st med scale report $keyn)")
        p1=$(st diff scale report $key1 direct) pn=$(st diff scale report $keyn direct)
        a1=$(st med scale report ab_${op}_ns_1000) an=$(st med scale report ab_${op}_ns_$last)
        ra=$(calc '(b > 20 ? b : 20) / (a > 20 ? a : 20)' "$a1" "$an")
        verdict=$(budget "scale.flat_$op" "$op flat from 1k to $last live: shim's added time at $last <= 2x at 1k (A/B)" "$ra" le 2)
        md "| $op | $(x "$rd") | $(x "$rs") | $(st_t "$a1") | $(st_t "$an") | $(st_t "$p1") / $(st_t "$pn") | <= 2x added at 1k | $verdict |"
        jfig "scale.flat_${op}_lifo" 3 "$op time $last live / 1k live (newest first), shim" x "$rs" "$rd" NA NA NA
        jfig "scale.flat_added_$op" 3 "$op added time (A/B) $last live / 1k live, floor 20 ns" x "$ra" NA NA NA NA
        at=1000
        while [ "$at" -le "$SCALE_N" ]; do
            jfig "scale.ab_$op.$at" 3 "$op added by the shim at $at live (A/B)" ns "$(st med scale report ab_${op}_ns_$at)" NA "$(st med scale report ab_${op}_ns_$at)" NA "$(st list scale report ab_${op}_ns_$at)"
            at=$((at * 10))
        done
    done
    md ""
    md "With random victims, the added time at $last live: create $(st_t "$(st diff scale report create_rand_ns_$last direct)"), destroy $(st_t "$(st diff scale report destroy_rand_ns_$last direct)") (every lookup in a table of $last entries misses the cache; for information)."
    md ""
    md "| while filling | direct | shim |"
    md "| --- | ---: | ---: |"
    at=1000
    while [ "$at" -le "$SCALE_N" ]; do
        md "| mean create up to $at live (incl. page faults, 2 clock reads) | $(t "$(st med scale direct fill_ns_$at)") | $(t "$(st med scale report fill_ns_$at)") |"
        at=$((at * 10))
    done
    md "| slowest single create (a table resize shows here) | $(t "$(st med scale direct worst_create_ns)") | $(t "$(st med scale report worst_create_ns)") |"
    jfig scale.worst_create 3 "slowest single create while filling" ns "$(st med scale report worst_create_ns)" "$(st med scale direct worst_create_ns)" NA NA NA
    md ""
    md "Reports of $SCALE_N orphans (the PD and every MR leak; IBV_SHIM_LOG_FILE and IBV_SHIM_REPORT on a $FS_KIND):"
    md ""
    md "| | direct | shim | added | budget | verdict |"
    md "| --- | ---: | ---: | ---: | --- | --- |"
    d=$(st med scale direct close_ns) s=$(st med scale report close_ns) a=$(st diff scale report close_ns direct)
    verdict=$(budget scale.close_report "ibv_close_device with $SCALE_N orphans (tree report at WARN) < 1 s" "$s" lt 1000000000)
    md "| ibv_close_device (close report to the log) | $(t "$d") | $(t "$s") | $(st_t "$a") | < 1 s | $verdict |"
    jfig scale.close_ns 3 "ibv_close_device with $SCALE_N orphans" ns "$s" "$d" "$a" NA "$(st list scale report close_ns)"
    d=$(st med scale direct exit_ns) s=$(st med scale report exit_ns) a=$(st diff scale report exit_ns direct)
    verdict=$(budget scale.exit_report "process exit with $SCALE_N orphans (JSON report) < 1 s" "$s" lt 1000000000)
    md "| process exit (JSON report), exit() to reaped | $(t "$d") | $(t "$s") | $(st_t "$a") | < 1 s | $verdict |"
    jfig scale.exit_ns 3 "process exit with $SCALE_N orphans" ns "$s" "$d" "$a" NA "$(st list scale report exit_ns)"
    lb=$(st med scale report log_bytes) jb=$(st med scale report json_bytes)
    md "| log written (bytes; per object) | | $(f "$lb" 0); $(f "$(calc 'a / b' "$lb" "$SCALE_N")" 1) | | | |"
    md "| JSON report written (bytes; per object) | | $(f "$jb" 0); $(f "$(calc 'a / b' "$jb" "$SCALE_N")" 1) | | | |"
    md "| MRs listed in the JSON report | | $(f "$(st med scale report json_mrs)" 0) of $SCALE_N | | | |"
    jfig scale.log_bytes 3 "close-report log size" bytes "$lb" NA NA NA NA
    jfig scale.json_bytes 3 "JSON report size" bytes "$jb" NA NA NA NA
    md "| fill $SCALE_N MRs (whole loop) | $(f "$(st med scale direct fill_s)" 2) s | $(f "$(st med scale report fill_s)" 2) s | | | |"

    # 3b. The close of a clean context with SCALE_N objects live on another
    # context, against the same close with none: the registry walks only
    # the closing context's objects. Then closes that each leak one PD.
    say "3b. close: $SCALE_REPS repetitions x {direct, shim log off}, $SCALE_N live PDs elsewhere"
    r=1
    while [ $r -le "$SCALE_REPS" ]; do
        run_rec close direct $r sim "$B/close" "$SCALE_N" 201
        run_rec close off $r sim "$B/close" "$SCALE_N" 201
        r=$((r + 1))
    done
    md ""
    md "ibv_close_device of a clean context (it owns nothing), median of 201 closes, with no other object"
    md "live and with $SCALE_N PDs live on another context; then closes that each leak one PD (the"
    md "leaks stay tracked as zombies), first tenth against last tenth of 201 cycles:"
    md ""
    md "| | direct | shim (log off) | budget | verdict |"
    md "| --- | ---: | ---: | --- | --- |"
    c0d=$(st med close direct close_clean_ns_0) c0s=$(st med close off close_clean_ns_0)
    cnd=$(st med close direct close_clean_ns_n) cns=$(st med close off close_clean_ns_n)
    cr=$(st med close off close_ratio)
    verdict=$(budget close.ratio "close of a clean context, $SCALE_N objects live elsewhere / none: <= 2x" "$cr" le 2)
    md "| close, nothing else live | $(t "$c0d") | $(t "$c0s") | | |"
    md "| close, $SCALE_N PDs live on another context | $(t "$cnd") | $(t "$cns") | | |"
    md "| ratio ($SCALE_N live / none) | $(f "$(st med close direct close_ratio)" 2)x | $(f "$cr" 2)x | <= 2x | $verdict |"
    md "| close leaking one PD, first tenth of the cycles | $(t "$(st med close direct leak_close_ns_first)") | $(t "$(st med close off leak_close_ns_first)") | | |"
    md "| close leaking one PD, last tenth of the cycles | $(t "$(st med close direct leak_close_ns_last)") | $(t "$(st med close off leak_close_ns_last)") | | |"
    jfig close.clean_0 3 "close of a clean context, nothing else live" ns "$c0s" "$c0d" "$(calc 'b - a' "$c0d" "$c0s")" NA "$(st list close off close_clean_ns_0)"
    jfig close.clean_n 3 "close of a clean context, $SCALE_N PDs live elsewhere" ns "$cns" "$cnd" "$(calc 'b - a' "$cnd" "$cns")" NA "$(st list close off close_clean_ns_n)"
    jfig close.ratio 3 "close with $SCALE_N live elsewhere / close with none" x "$cr" NA NA NA "$(st list close off close_ratio)"
    printf 'bench: close of a clean context: %s ns with nothing live, %s ns with %s PDs live elsewhere: ratio %sx (budget <= 2x: %s)\n' \
        "$c0s" "$cns" "$SCALE_N" "$cr" "$verdict" >&2
else
    why=${SIM_WHY:-no shim}
    notrun 3 "$why"
    md "Not run: $why."
fi

# ================================================================== 4. threads
SECTION=4
md "## 4. Two threads on separate contexts against one thread"
md ""
if [ "$HAVE_SHIM" = 1 ] && [ "$HAVE_SIM" = 1 ]; then
    say "4. threads: $THR_REPS x (1 thread, 2 threads) x ${THR_MS} ms, direct and shim"
    r=1
    while [ $r -le 3 ]; do
        run_rec threads direct $r sim "$B/threads" $THR_MS $THR_REPS
        run_rec threads shim $r sim "$B/threads" $THR_MS $THR_REPS ab
        r=$((r + 1))
    done
    mach=$(st med threads shim machine_ratio) simr=$(st med threads shim real_ratio) rt=$(st med threads shim ratio)
    md "Each thread creates and destroys a PD, an MR, a CQ and a QP per round on its own context."
    md "Rounds per second; two / one = median over $THR_REPS alternations of (two threads / one"
    md "thread) in a process, then the median of 3 processes. In the same shim processes, the same"
    md "alternation through the sim's own functions (the shim never sees them: the sim's own"
    md "scaling at the same moment, the ceiling for the shim's) and with a loop that only computes"
    md "(\"machine\": what the $(nproc) shared cores gave two threads, 2.00x when idle)."
    md ""
    md "| | one thread | two threads | two / one | machine | budget | verdict |"
    md "| --- | ---: | ---: | ---: | ---: | --- | --- |"
    md "| direct on the sim (own processes) | $(f "$(st med threads direct one_per_s)" 0)/s | $(f "$(st med threads direct two_per_s)" 0)/s | $(x "$(st med threads direct ratio)") | $(x "$(st med threads direct machine_ratio)") | | (reference) |"
    md "| direct on the sim (inside the shim runs) | $(f "$(st med threads shim real_one_per_s)" 0)/s | $(f "$(st med threads shim real_two_per_s)" 0)/s | $(x "$simr") | $(x "$mach") | | (ceiling) |"
    # PASS at 1.5x. A miss is the shim's only where the machine gave two
    # cores and the sim itself scaled past 1.5x (or the shim lost >5% of it).
    verdict=$(budget threads.scaling "two threads on separate contexts >= 1.5x one thread (shim)" "$rt" ge 1.5 "$mach")
    why=""
    if [ "$verdict" = UNRESOLVED ]; then
        why=" (the machine gave two threads only $(x "$mach"))"
    elif [ "$verdict" = FAIL ] && awk -v s="$rt" -v c="$simr" 'BEGIN { exit !(c != "NA" && c < 1.5 && s >= 0.95 * c) }'; then
        sed -i '$s/\tFAIL$/\tUNRESOLVED/' "$BUDGETS"
        verdict=UNRESOLVED why=" (the sim itself scales only $(x "$simr"); the shim keeps $(f "$(calc 'a / b * 100' "$rt" "$simr")" 0)% of it)"
    fi
    md "| shim | $(f "$(st med threads shim one_per_s)" 0)/s | $(f "$(st med threads shim two_per_s)" 0)/s | $(x "$rt") | $(x "$mach") | >= 1.50x | $verdict$why |"
    jfig threads.direct 4 "two threads / one thread, direct on the sim" x "$(st med threads direct ratio)" NA NA NA "$(st list threads direct ratio)"
    jfig threads.sim_in_shim_runs 4 "two threads / one thread, the sim's own functions inside the shim runs" x "$simr" NA NA NA "$(st list threads shim real_ratio)"
    jfig threads.shim 4 "two threads / one thread, shim" x "$rt" "$simr" NA "$(calc 'a / b' "$rt" "$simr")" "$(st list threads shim ratio)"
    jfig threads.machine 4 "two threads / one thread, compute only (machine), in the shim runs" x "$mach" NA NA NA "$(st list threads shim machine_ratio)"
    md ""
    md "One thread, shim against the sim's own functions in the same processes: $(x "$(calc 'a / b' "$(st med threads shim one_per_s)" "$(st med threads shim real_one_per_s)")") the throughput."
else
    why=${SIM_WHY:-no shim}
    notrun 4 "$why"
    md "Not run: $why."
fi

# ================================================================ 5. data path
SECTION=5
md "## 5. Data path: ibv_post_send + ibv_poll_cq (inline verbs) on the sim"
md ""
if [ "$HAVE_SHIM" = 1 ] && [ "$HAVE_DP" = 1 ]; then
    say "5. data path: $REPS repetitions x {direct, shim}"
    r=1
    while [ $r -le "$REPS" ]; do
        run_rec datapath direct $r sim "$B/datapath" $DP_ITERS $DP_BATCHES
        run_rec datapath shim $r sim "$B/datapath" $DP_ITERS $DP_BATCHES
        r=$((r + 1))
    done
    d=$(st med datapath direct ns) s=$(st med datapath shim ns) rt=$(st ratio datapath shim ns direct)
    verdict=$(budget datapath.ratio "data path at the same speed with the shim (ratio within 1 +- 0.05)" "$rt" within 0.05)
    md "One signaled 8-byte inline RDMA WRITE between two loopback RC QPs, polled to completion. Median over $REPS runs."
    md ""
    md "| | direct | shim | shim / direct | budget | verdict |"
    md "| --- | ---: | ---: | ---: | --- | --- |"
    md "| post_send + poll_cq | $(t "$d") | $(t "$s") | $(x "$rt") | 1.00x ± 0.05 | $verdict |"
    jfig datapath 5 "post_send + poll_cq, shim / direct" ns "$s" "$d" "$(st diff datapath shim ns direct)" "$rt" "$(st list datapath shim ns)"

    # The data-path checks (IBV_SHIM_CHECK=datapath): the same pair with the
    # buffer as an SGE (not inline), so that each post looks its lkey up.
    say "5b. data-path checks: $REPS repetitions x {direct, shim, shim + checks}"
    r=1
    while [ $r -le "$REPS" ]; do
        run_rec dpcheck direct $r sim "$B/datapath" $DP_ITERS $DP_BATCHES sge
        run_rec dpcheck shim $r sim "$B/datapath" $DP_ITERS $DP_BATCHES sge
        run_rec dpcheck checked $r sim "$B/datapath" $DP_ITERS $DP_BATCHES sge
        r=$((r + 1))
    done
    d=$(st med dpcheck direct ns) s=$(st med dpcheck shim ns) c=$(st med dpcheck checked ns)
    rt=$(st ratio dpcheck shim ns direct) rc=$(st ratio dpcheck checked ns direct)
    added=$(st diff dpcheck checked ns direct)
    verdict=$(budget dpcheck.ratio "checks off: the data path untouched (ratio within 1 +- 0.05)" "$rt" within 0.05)
    vc=$(budget dpcheck.added "checks on: at most 50 ns added per posted WR and its polled completion" "$added" le 50)
    md ""
    md "The same pair, the 8 bytes sent from an SGE (not inline), with the data-path checks off (the default: the provider's table untouched) and on (\`IBV_SHIM_CHECK=datapath\`: each WR's lkey, range, access and QP state checked, each completion scanned for errors). Median over $REPS runs."
    md ""
    md "| | direct | shim | shim / direct | budget | verdict |"
    md "| --- | ---: | ---: | ---: | --- | --- |"
    md "| checks off | $(t "$d") | $(t "$s") | $(x "$rt") | 1.00x ± 0.05 | $verdict |"
    md "| checks on | $(t "$d") | $(t "$c") | $(x "$rc") (+$(t "$added")) | +50 ns | $vc |"
    jfig dpcheck_off 5 "post_send + poll_cq (SGE), checks off / direct" ns "$s" "$d" "$(st diff dpcheck shim ns direct)" "$rt" "$(st list dpcheck shim ns)"
    jfig dpcheck_on 5 "post_send + poll_cq (SGE), checks on / direct" ns "$c" "$d" "$added" "$rc" "$(st list dpcheck checked ns)"

    # Work in flight (IBV_SHIM_CHECK=inflight): the same pair, WRITEs of 64 B
    # and 64 KiB from an SGE, each fingerprinted at post and at completion;
    # "inflight" with the sim's witness off (what hardware pays), "exact"
    # with it on (the sim also keeps a copy of each source).
    say "5c. work in flight: $REPS repetitions x {direct, shim, datapath, inflight, exact} x {64 B, 64 KiB}"
    for n in 64 65536; do
        r=1
        while [ $r -le "$REPS" ]; do
            for cfg in direct shim checked inflight exact; do
                run_rec "inflight$n" $cfg $r sim "$B/datapath" $DP_ITERS $DP_BATCHES sge $n
            done
            r=$((r + 1))
        done
    done
    md ""
    md "The same pair, one signaled RDMA WRITE from an SGE of 64 B or 64 KiB, with the shim's checks off, \`datapath\` and \`inflight\` (each WR's source kept at the post and compared at its completion: 64 B copied, 64 KiB fingerprinted with xxh3 in 8 blocks, twice its bytes hashed), the sim keeping no sources (\`IBV_SIM_WITNESS=off\`, what hardware costs); \`sim exact\` is \`inflight\` with the sim keeping a copy of what each send read (its default under \`inflight\`), a cost of the sim, not of the check. Median over $REPS runs; ± is the median absolute deviation of the paired differences."
    md ""
    md "| bytes | direct | checks off | datapath | inflight | inflight - datapath per WR | fingerprinting | sim exact | sim exact - inflight per WR | budget | verdict |"
    md "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"
    for n in 64 65536; do
        d=$(st med "inflight$n" direct ns) s=$(st med "inflight$n" shim ns)
        c=$(st med "inflight$n" checked ns) i=$(st med "inflight$n" inflight ns)
        e=$(st med "inflight$n" exact ns)
        extra=$(awk -v i="$i" -v c="$c" 'BEGIN { printf "%.1f", i - c }')
        kept=$(awk -v i="$i" -v e="$e" 'BEGIN { printf "%.1f", e - i }')
        gbs=$(awk -v e="$extra" -v n="$n" 'BEGIN { if (e > 0) printf "%.1f", 2 * n / e; else print "inf" }')
        if [ "$n" = 65536 ]; then
            v=$(budget "inflight$n.gbs" "inflight: fingerprinting at least 10 GB/s" "$gbs" ge 10)
        else
            v=$(budget "inflight$n.off" "inflight off: the data path untouched (ratio within 1 +- 0.05)" "$(st ratio "inflight$n" shim ns direct)" within 0.05)
        fi
        md "| $n | $(t "$d") | $(t "$s") | $(t "$c") | $(t "$i") | +$(t "$extra") ± $(t "$(st dmad "inflight$n" inflight ns checked)") | $gbs GB/s | $(t "$e") | +$(t "$kept") ± $(t "$(st dmad "inflight$n" exact ns inflight)") | $([ "$n" = 65536 ] && echo ">= 10 GB/s" || echo "off: 1.00x ± 0.05") | $v |"
        jfig "inflight$n" 5 "post_send + poll_cq ($n B SGE), inflight / direct" ns "$i" "$d" "$(st diff "inflight$n" inflight ns direct)" "$(st ratio "inflight$n" inflight ns direct)" "$(st list "inflight$n" inflight ns)"
        jfig "inflight$n.exact" 5 "post_send + poll_cq ($n B SGE), inflight with the sim's witness / direct" ns "$e" "$d" "$(st diff "inflight$n" exact ns direct)" "$(st ratio "inflight$n" exact ns direct)" "$(st list "inflight$n" exact ns)"
    done
else
    why=${SIM_WHY:-${DP_WHY:-no shim}}
    notrun 5 "$why"
    md "Not run: $why."
fi

# =================================================================== 6. start-up
SECTION=6
md "## 6. Start-up: a program that calls ibv_get_device_list once"
md ""
if [ "$HAVE_SHIM" = 1 ] && { [ "$HAVE_TB" = 1 ] || [ "$HAVE_SIM" = 1 ]; }; then
    say "6. start-up: $START_RUNS runs each, alternating"
    md "Wall time of the whole process (fork, exec, loading, the call, exit), $START_RUNS runs each, alternating; medians."
    md ""
    md "| library | direct | shim | added (median of pairs) | x direct | budget | verdict |"
    md "| --- | ---: | ---: | ---: | ---: | --- | --- |"
    for lib in tb sim; do
        if [ $lib = tb ]; then [ "$HAVE_TB" = 1 ] || continue; lbl="real libibverbs, test bed"; else [ "$HAVE_SIM" = 1 ] || continue; lbl=sim; fi
        run_rec startup $lib 1 $lib "$B/spawn" $START_RUNS -b LD_PRELOAD="$SHIM" -- "$B/startup"
        d=$(st med startup $lib a_ns) s=$(st med startup $lib b_ns) a=$(st med startup $lib added_ns) rt=$(st med startup $lib ratio)
        fails=$(calc 'a + b' "$(st med startup $lib a_fail)" "$(st med startup $lib b_fail)")
        verdict=$(budget "startup.$lib" "start-up added <= 2 ms ($lbl)" "$a" le 2000000)
        [ "$fails" != 0 ] && [ "$fails" != NA ] && verdict="$verdict ($fails runs failed)"
        md "| $lbl | $(t "$d") | $(t "$s") | $(st_t "$a") | $(x "$rt") | <= 2 ms added | $verdict |"
        jfig "startup.$lib" 6 "start-up, $lbl" ns "$s" "$d" "$a" "$rt" NA
    done
else
    notrun 6 "${TB_WHY:-${SIM_WHY:-no shim}}"
    md "Not run."
fi

# ================================ 6b. a forwarded rdma_* call against verbs
# The shim interposes librdmacm too: a forwarded rdma_* call (guard, cm
# depth, record) must add no more than a forwarded verbs call does. All
# in one process, interleaved batch by batch, on the sim and its librdmacm.
# The budget compares calls of the same arity (3 arguments); the 5-argument
# rdma_set_option is shown beside them (each argument more is kept across
# the real call: a few instructions).
SECTION=6b
md "## 6b. A forwarded rdma_* call against a forwarded verbs call (log off)"
md ""
if [ "$HAVE_SHIM" = 1 ] && [ "$HAVE_SIM" = 1 ] && [ -x "$B/cm_forward" ]; then
    say "6b. forwarded rdma_* vs verbs call: $REPS repetitions x {direct, shim log off}"
    r=1
    while [ $r -le "$REPS" ]; do
        run_rec cmfwd direct $r sim env IBV_SIM_FABRIC="bench-cm-$$" "$B/cm_forward" "$DEV_ITERS" "$DEV_BATCHES"
        run_rec cmfwd off $r sim env IBV_SIM_FABRIC="bench-cm-$$" "$B/cm_forward" "$DEV_ITERS" "$DEV_BATCHES"
        r=$((r + 1))
    done
    md "Per call, median over $REPS repetitions of each process's median batch ($DEV_BATCHES batches of $DEV_ITERS calls,"
    md "the two calls interleaved batch by batch); added = median of the paired (shim - direct)"
    md "differences, spread = their median absolute deviation."
    md ""
    md "| call | direct | shim (log off) | added | spread | budget | verdict |"
    md "| --- | ---: | ---: | ---: | ---: | --- | --- |"
    va=$(st diff cmfwd off verbs_ns direct) vn=$(st dmad cmfwd off verbs_ns direct)
    ca=$(st diff cmfwd off cm_ns direct) cn=$(st dmad cmfwd off cm_ns direct)
    ra=$(st diff cmfwd off cm3_ns direct) rn=$(st dmad cmfwd off cm3_ns direct)
    md "| ibv_get_pkey_index (forwarded verbs, 3 arguments) | $(t "$(st med cmfwd direct verbs_ns)") | $(t "$(st med cmfwd off verbs_ns)") | $(st_t "$va") | $(t "$vn") | | |"
    lim=$(calc 'a + b' "$va" "$vn")
    verdict=$(budget cm.forward "a forwarded rdma_* call adds <= a forwarded verbs call of its arity's added time (+ its spread)" "$ra" le "$lim" "$rn")
    md "| rdma_reject (forwarded rdma_*, 3 arguments) | $(t "$(st med cmfwd direct cm3_ns)") | $(t "$(st med cmfwd off cm3_ns)") | $(st_t "$ra") | $(t "$rn") | <= verbs added | $verdict |"
    md "| rdma_set_option (forwarded rdma_*, 5 arguments) | $(t "$(st med cmfwd direct cm_ns)") | $(t "$(st med cmfwd off cm_ns)") | $(st_t "$ca") | $(t "$cn") | (shown) | |"
    jfig cm.forward_verbs 6 "forwarded verbs call, added" ns "$(st med cmfwd off verbs_ns)" "$(st med cmfwd direct verbs_ns)" "$va" NA "$(st list cmfwd off verbs_ns)"
    jfig cm.forward_cm 6 "forwarded rdma_* call (5 arguments), added" ns "$(st med cmfwd off cm_ns)" "$(st med cmfwd direct cm_ns)" "$ca" NA "$(st list cmfwd off cm_ns)"
    jfig cm.forward_cm3 6 "forwarded rdma_* call (3 arguments), added" ns "$(st med cmfwd off cm3_ns)" "$(st med cmfwd direct cm3_ns)" "$ra" NA "$(st list cmfwd off cm3_ns)"
else
    notrun 6b "${SIM_WHY:-no shim, sim or cm_forward}"
    md "Not run."
fi

# ============================================ 7. tracing (bench/trace.sh)
. "$BENCH/trace.sh"

# ====================================================== sim fabric (perftest)
# bench/sim_fabric.sh: ib_write_bw beside memcpy, ib_send_lat/ib_read_lat,
# between two processes on the sim; its budgets join this run's.
SECTION=simfabric
say "sim fabric: perftest between two processes on the sim"
if [ "$QUICK" = 1 ]; then SF_REPS=${BENCH_SIM_REPS:-2}; else SF_REPS=${BENCH_SIM_REPS:-5}; fi
BENCH_SIM="$SIMDIR" BENCH_SIM_REPS=$SF_REPS BENCH_BUDGETS="$BUDGETS" sh "$BENCH/sim_fabric.sh" >"$W/md/$SECTION"

# ================================================ the real-kernel VM's boot
# bench/vm.sh: what `ibv-shim --vm` pays per boot (no budget).
SECTION=vm
say "the real-kernel VM: boot time"
sh "$BENCH/vm.sh" >"$W/md/$SECTION"

# ================================================================== the report
T_END=$(date +%s)
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ] && COMMIT="$COMMIT (+ uncommitted changes)"
CPU=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
NPROC=$(nproc)
KERNEL=$(uname -r)
DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
RDMA=$(dpkg-query -W -f='${Version}' libibverbs1 2>/dev/null || echo unknown)
NFAIL=$(awk -F'\t' '$5 == "FAIL"' "$BUDGETS" | wc -l)
NPASS=$(awk -F'\t' '$5 == "PASS"' "$BUDGETS" | wc -l)
NOTHER=$(awk -F'\t' '$5 != "PASS" && $5 != "FAIL"' "$BUDGETS" | wc -l)

{
    echo "# ibv-shim benchmark"
    echo ""
    echo "| machine | |"
    echo "| --- | --- |"
    echo "| date | $DATE |"
    echo "| commit | $COMMIT |"
    echo "| CPU | $CPU, nproc $NPROC |"
    echo "| kernel | $KERNEL |"
    echo "| rdma-core (libibverbs1) | $RDMA |"
    echo "| load average at the end | $LOAD |"
    echo "| duration | $((T_END - T_START)) s$([ "$QUICK" = 1 ] && echo ' (BENCH_QUICK=1: short run)') |"
    echo "| shim | $SHIM |"
    echo "| audit in the shim | $([ "$HAVE_AUDIT" = 1 ] && echo yes || echo "no: $AUDIT_WHY") |"
    echo "| sim | $([ "$HAVE_SIM" = 1 ] && echo "$SIMDIR" || echo "not ready: $SIM_WHY") |"
    echo ""
    echo "Budgets: $NPASS pass, $NFAIL fail, $NOTHER not judged."
    echo ""
    for s in 1 2 3 4 5 6 6b 7 simfabric vm; do [ -f "$W/md/$s" ] && { cat "$W/md/$s"; echo ""; }; done
    echo "## Budgets"
    echo ""
    echo "| budget | figure | limit | verdict |"
    echo "| --- | ---: | --- | --- |"
    awk -F'\t' '{ printf "| %s | %s | %s | %s |\n", $2, $3, $4, $5 }' "$BUDGETS"
    if [ -s "$NOTRUN" ]; then
        echo ""
        echo "## Not run"
        echo ""
        awk -F'\t' '{ printf "- section %s: %s\n", $1, $2 }' "$NOTRUN"
    fi
} >"$OUT/latest.md"

jstr() { printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g'; }
{
    echo "{"
    echo "  \"schema\": \"ibv-shim-bench/1\","
    echo "  \"machine\": {\"date\": \"$DATE\", \"commit\": \"$(jstr "$COMMIT")\", \"cpu\": \"$(jstr "$CPU")\", \"nproc\": $NPROC, \"kernel\": \"$KERNEL\", \"rdma_core\": \"$RDMA\", \"loadavg_end\": \"$LOAD\", \"duration_s\": $((T_END - T_START)), \"quick\": $([ "$QUICK" = 1 ] && echo true || echo false)},"
    echo "  \"available\": {\"shim\": $HAVE_SHIM, \"testbed\": $HAVE_TB, \"sim\": $HAVE_SIM, \"datapath\": $HAVE_DP, \"audit\": $HAVE_AUDIT, \"ltrace\": $HAVE_LTRACE, \"callgrind\": $HAVE_CG},"
    echo "  \"settings\": {\"reps\": $REPS, \"scale_n\": $SCALE_N, \"scale_reps\": $SCALE_REPS, \"startup_runs\": $START_RUNS, \"log_dir\": \"$FS_KIND\"},"
    echo "  \"budgets\": ["
    awk -F'\t' '{ gsub(/"/, "\\\"", $2); v = ($3 == "NA" || $3 == "") ? "null" : $3 + 0
        printf "%s    {\"id\": \"%s\", \"budget\": \"%s\", \"value\": %s, \"limit\": \"%s\", \"verdict\": \"%s\"}", (NR > 1 ? ",\n" : ""), $1, $2, v, $4, $5 }
        END { if (NR) print "" }' "$BUDGETS"
    echo "  ],"
    echo "  \"figures\": ["
    awk '{ printf "%s    %s", (NR > 1 ? ",\n" : ""), $0 } END { if (NR) print "" }' "$JFIGS"
    echo "  ],"
    echo "  \"not_run\": ["
    awk -F'\t' '{ gsub(/"/, "\\\"", $2); printf "%s    {\"section\": \"%s\", \"reason\": \"%s\"}", (NR > 1 ? ",\n" : ""), $1, $2 } END { if (NR) print "" }' "$NOTRUN"
    echo "  ]"
    echo "}"
} >"$OUT/latest.json"

cat "$OUT/latest.md"
echo ""
if [ -s "$ERRLOG" ]; then
    cp "$ERRLOG" "$OUT/errors.log"
    echo "Some runs failed or gcc warned; their output is in bench/results/errors.log."
else
    rm -f "$OUT/errors.log"
fi
echo "Written: bench/results/latest.md, bench/results/latest.json"
if [ "$NFAIL" -gt 0 ] || [ "$NOTHER" -gt 0 ] || [ -s "$NOTRUN" ]; then
    echo ""
    echo "==== BUDGET MISSES AND GAPS ===="
    awk -F'\t' '$5 != "PASS" { printf "%-10s %s: %s (limit %s)\n", $5, $2, $3, $4 }' "$BUDGETS"
    [ -s "$NOTRUN" ] && awk -F'\t' '{ printf "NOT RUN    section %s: %s\n", $1, $2 }' "$NOTRUN"
fi
exit 0
