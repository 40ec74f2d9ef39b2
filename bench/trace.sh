# Sourced by bench/run.sh (its helpers and settings): section 7, the cost
# of tracing a verbs call. The same ibv_get_device_name loop as section 1,
# repetition by repetition:
#   direct     the program alone
#   trace      the shim's binary trace (IBV_SHIM_TRACE, block: every
#              record kept), logging otherwise at its default
#   tracedrop  the same in drop mode (the default): cheaper when the ring
#              is full, because records are dropped (and counted)
#   uftrace    `uftrace record` (library calls through its PLT hooks)
#   lttng      bench/c/lttng_name.c: the loop with one LTTng-UST
#              tracepoint per call, in an lttng session that records it
#   ltrace     `ltrace -e ibv_*`, in the first LT_REPS repetitions
# "added" is each configuration's time per call minus direct's, paired by
# repetition; the ratios (uftrace ÷ trace, ...) are medians of the
# per-repetition ratios of added costs.

SECTION=7
md "## 7. Tracing a call: the shim's trace beside uftrace, LTTng-UST and ltrace"
md ""
if [ "$QUICK" = 1 ]; then TR_ITERS=2000 TR_BATCHES=5; else TR_ITERS=5000 TR_BATCHES=11; fi
TR_LT_ITERS=300
LAUNCHER=$(dirname "$SHIM")/ibv-shim
HAVE_UFTRACE=0 HAVE_LTTNG=0 LTTNG_STARTED=""
command -v uftrace >/dev/null 2>&1 && HAVE_UFTRACE=1
if command -v lttng >/dev/null 2>&1 && command -v lttng-sessiond >/dev/null 2>&1 &&
    gcc -O2 -Wall -Wextra -I"$BENCH/c" -o "$B/lttng_name" "$BENCH/c/lttng_name.c" -libverbs -llttng-ust -ldl 2>>"$ERRLOG"; then
    HAVE_LTTNG=1
fi
# The library the loop runs on: the real one when the test bed is up.
if [ "$HAVE_TB" = 1 ]; then TR_LIB=tb TR_LIBTXT="the real libibverbs (test bed)"; else TR_LIB=sim TR_LIBTXT="ibv-sim"; fi

# An lttng session that records ibvbench:* (a session daemon of our own
# when none runs; stopped at the end of the section).
lttng_up() {
    if ! lttng list >/dev/null 2>&1; then
        lttng-sessiond --daemonize --no-kernel 2>>"$ERRLOG" || return 1
        LTTNG_STARTED=$(cat /var/run/lttng/lttng-sessiond.pid 2>/dev/null || cat "$HOME/.lttng/lttng-sessiond.pid" 2>/dev/null)
    fi
    lttng create "ibvbench-$$" --output="$FS/lttng" >/dev/null 2>>"$ERRLOG" &&
        lttng enable-event --userspace 'ibvbench:*' >/dev/null 2>>"$ERRLOG" &&
        lttng start >/dev/null 2>>"$ERRLOG"
}
lttng_down() {
    lttng stop "ibvbench-$$" >/dev/null 2>&1
    lttng destroy "ibvbench-$$" >/dev/null 2>&1
    [ -n "$LTTNG_STARTED" ] && kill "$LTTNG_STARTED" 2>/dev/null
    rm -rf "$FS/lttng"
}

if [ "$HAVE_SHIM" = 1 ] && { [ "$HAVE_TB" = 1 ] || [ "$HAVE_SIM" = 1 ]; }; then
    [ "$HAVE_LTTNG" = 1 ] && { lttng_up || { HAVE_LTTNG=0; notrun "7 (LTTng)" "no lttng session could be made (see errors.log)"; }; }
    say "7. tracing: $REPS repetitions x {direct, trace, trace drop, uftrace=$HAVE_UFTRACE, lttng=$HAVE_LTTNG, ltrace=$HAVE_LTRACE}"
    dev="$B/device name $TR_ITERS $TR_BATCHES"
    calls=$((TR_ITERS / 10 + TR_ITERS * TR_BATCHES))
    r=1
    while [ $r -le "$REPS" ]; do
        run_rec tr direct $r $TR_LIB $dev
        rm -f "$FS"/trace.*
        if run_rec tr trace $r $TR_LIB env LD_PRELOAD="$SHIM" IBV_SHIM_TRACE="$FS/trace.%p" IBV_SHIM_TRACE_FULL=block $dev; then
            # Every call recorded? (the decoder's count; the shim's loss line)
            n=$("$LAUNCHER" trace --stats "$FS"/trace.* 2>/dev/null | awk '$1 == "ibv_get_device_name" { print $2 }')
            echo "tr trace $r recorded $(calc 'a / b' "${n:-0}" "$calls")" >>"$RAW"
        fi
        rm -f "$FS"/trace.*
        if run_rec tr tracedrop $r $TR_LIB env LD_PRELOAD="$SHIM" IBV_SHIM_TRACE="$FS/trace.%p" $dev; then
            lost=$(sed -n 's/.*trace: \([0-9]*\) records lost.*/\1/p' "$W/err" | head -n 1)
            echo "tr tracedrop $r lost $(calc 'a / b' "${lost:-0}" "$calls")" >>"$RAW"
        fi
        rm -f "$FS"/trace.*
        [ "$HAVE_UFTRACE" = 1 ] && run_rec tr uftrace $r $TR_LIB uftrace record --force -d "$FS/uftrace.data" $dev
        rm -rf "$FS/uftrace.data"
        [ "$HAVE_LTTNG" = 1 ] && run_rec tr lttng $r $TR_LIB "$B/lttng_name" $TR_ITERS $TR_BATCHES
        if [ "$HAVE_LTRACE" = 1 ] && [ $r -le "$LT_REPS" ]; then
            run_rec tr ltrace $r $TR_LIB "$B/device" name $TR_LT_ITERS 3
            rm -f "$FS/ltrace.out"
        fi
        r=$((r + 1))
    done
    [ "$HAVE_LTTNG" = 1 ] && lttng_down
    [ "$HAVE_UFTRACE" = 1 ] || notrun "7 (uftrace)" "uftrace is not installed (scripts/deps.sh installs it)"
    [ "$HAVE_LTTNG" = 1 ] || notrun "7 (LTTng)" "lttng-tools / liblttng-ust-dev are not installed, or no session could be made"
    [ "$HAVE_LTRACE" = 1 ] || notrun "7 (ltrace)" "ltrace is not installed"
    # Per repetition: each tracer's added cost over the shim's trace's.
    awk '$1 == "tr" && $4 == "ns" { v[$2, $3] = $5; reps[$3] = 1 }
        END { n = split("uftrace lttng ltrace", cs, " ")
            for (r in reps) for (i = 1; i <= n; i++) { c = cs[i]
                if ((c, r) in v && ("trace", r) in v && ("direct", r) in v && v["trace", r] > v["direct", r])
                    print "tr", c, r, "over_trace", (v[c, r] - v["direct", r]) / (v["trace", r] - v["direct", r]) } }' \
        "$RAW" >>"$RAW.tmp" && cat "$RAW.tmp" >>"$RAW" && rm -f "$RAW.tmp"

    md "ibv_get_device_name in a loop on $TR_LIBTXT, $TR_ITERS calls x $TR_BATCHES batches per run"
    md "(ltrace: $TR_LT_ITERS x 3), $REPS runs; each figure is the median over runs of the run's median"
    md "batch, \"added\" the median of per-run differences against direct (± their median absolute"
    md "deviation). The shim's trace keeps every record (block mode; \"recorded\" = records in the file"
    md "÷ calls made, from \`ibv-shim trace --stats\`); in drop mode the ring's overflow is dropped and"
    md "counted (\"lost\" = the shim's count ÷ calls). LTTng: a tracepoint the program itself calls"
    md "after each verb (no interposition), recorded by an lttng session."
    md ""
    md "| configuration | time per call | added vs direct | check |"
    md "| --- | ---: | ---: | --- |"
    for cfg in direct trace tracedrop uftrace lttng ltrace; do
        v=$(st med tr $cfg ns)
        [ "$v" = NA ] && continue
        a=$(st diff tr $cfg ns direct) noise=$(st dmad tr $cfg ns direct)
        case $cfg in
            direct) label="direct" chk="" ;;
            trace) label="shim trace, IBV_SHIM_TRACE_FULL=block" chk="recorded $(f "$(st med tr trace recorded)" 3)" ;;
            tracedrop) label="shim trace, drop (default)" chk="lost $(f "$(st med tr tracedrop lost)" 3)" ;;
            uftrace) label="uftrace record" chk="" ;;
            lttng) label="LTTng-UST tracepoint" chk="" ;;
            ltrace) label="ltrace -e 'ibv_*'" chk="" ;;
        esac
        if [ $cfg = direct ]; then md "| $label | $(t "$v") | | |"; else
            md "| $label | $(t "$v") | $(st_t "$a") ± $(t "$noise") | $chk |"; fi
        jfig "tr.$cfg" 7 "ibv_get_device_name, $label" ns "$v" "$(st med tr direct ns)" "$a" NA "$(st list tr $cfg ns)"
    done
    md ""
    md "| budget | figure | verdict |"
    md "| --- | ---: | --- |"
    a=$(st diff tr trace ns direct) noise=$(st dmad tr trace ns direct)
    md "| traced call: <= 100 ns added | $(st_t "$a") | $(budget tr.trace_added "traced call (shim trace, block): <= 100 ns added" "$a" le 100 "$noise") |"
    for c in uftrace lttng ltrace; do
        rr=$(st med tr $c over_trace)
        case $c in
            uftrace) lim=2 name="uftrace record" ;;
            lttng) lim=2 name="an LTTng-UST tracepoint" ;;
            ltrace) lim=1000 name="ltrace" ;;
        esac
        md "| $name ÷ shim trace (added cost): >= ${lim}x | $(x "$rr") | $(budget "tr.vs_$c" "shim trace >= ${lim}x cheaper than $name (added cost)" "$rr" ge $lim) |"
        jfig "tr.${c}_over_trace" 7 "$name added / shim trace added" x "$rr" NA NA NA "$(st list tr $c over_trace)"
    done
else
    notrun 7 "needs the shim and the test bed or the sim"
fi
