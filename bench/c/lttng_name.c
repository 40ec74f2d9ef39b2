/* The tracing figure's LTTng-UST configuration: bench/c/device.c's
 * ibv_get_device_name loop with one LTTng-UST tracepoint per call.
 *
 *   lttng_name ITERS BATCHES
 *
 * Prints ns=<median ns per call> like device.c. Run it inside an lttng
 * session with the ibvbench:* events enabled (bench/trace.sh does). */
#define TRACEPOINT_DEFINE
#define TRACEPOINT_CREATE_PROBES
#include "lttng_tp.h"

#include <infiniband/verbs.h>
#include <stdint.h>

#include "bench.h"

static volatile uintptr_t sink;

static void run(struct ibv_device *dev, long iters)
{
    for (long i = 0; i < iters; i++) {
        const char *name = ibv_get_device_name(dev);
        tracepoint(ibvbench, call, 1, (unsigned long)dev, (unsigned long)name, 0);
        sink += (uintptr_t)name;
    }
}

int main(int argc, char **argv)
{
    long iters = arg_long(argc, argv, 1, 100000);
    int batches = (int)arg_long(argc, argv, 2, 21);
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (!list || n == 0)
        die("no devices (is the test bed or the sim in place?)");
    run(list[0], iters > 10 ? iters / 10 : 1); /* warm-up */
    double *per = calloc((size_t)batches, sizeof *per);
    for (int b = 0; b < batches; b++) {
        double t0 = now_ns();
        run(list[0], iters);
        per[b] = (now_ns() - t0) / (double)iters;
    }
    report_batches("ns", per, batches);
    ibv_free_device_list(list);
    return 0;
}
