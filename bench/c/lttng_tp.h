/* The LTTng-UST tracepoint bench/run.sh's tracing figure compares the
 * shim's trace with: one event per verbs call (function, argument,
 * result, errno), as a hand-instrumented program would emit it. */
#undef TRACEPOINT_PROVIDER
#define TRACEPOINT_PROVIDER ibvbench

#undef TRACEPOINT_INCLUDE
#define TRACEPOINT_INCLUDE "./lttng_tp.h"

#if !defined(IBV_BENCH_LTTNG_TP_H) || defined(TRACEPOINT_HEADER_MULTI_READ)
#define IBV_BENCH_LTTNG_TP_H

#include <lttng/tracepoint.h>

TRACEPOINT_EVENT(ibvbench, call,
    TP_ARGS(int, fn, unsigned long, arg, unsigned long, result, int, err),
    TP_FIELDS(
        ctf_integer(int, fn, fn)
        ctf_integer_hex(unsigned long, arg, arg)
        ctf_integer_hex(unsigned long, result, result)
        ctf_integer(int, err, err)))

#endif

#include <lttng/tracepoint-event.h>
