/* Figure 1: device calls, per call.
 *
 *   device OP ITERS BATCHES
 *
 * OP: name  ibv_get_device_name(list[0])
 *     rot   ibv_get_device_name(list[i % n]): every device of the list in turn
 *     guid  ibv_get_device_guid(dev)
 *     list  ibv_get_device_list(&n) + ibv_free_device_list(list), per pair
 * Prints ns=<median ns per call (per pair for list)> over BATCHES batches of
 * ITERS calls, after one warm-up batch. Runs on whatever libibverbs the
 * process loads: the real one on the fake-sysfs test bed, or the sim. */
#include <infiniband/verbs.h>

#include "bench.h"

static volatile uintptr_t sink;
static struct ibv_device **devs;
static int ndevs;

static void run(const char *op, struct ibv_device *dev, long iters)
{
    if (!strcmp(op, "name")) {
        for (long i = 0; i < iters; i++)
            sink += (uintptr_t)ibv_get_device_name(dev);
    } else if (!strcmp(op, "rot")) {
        /* The same loop direct and under the shim: its own cost cancels. */
        for (long i = 0, d = 0; i < iters; i++, d = d + 1 == ndevs ? 0 : d + 1)
            sink += (uintptr_t)ibv_get_device_name(devs[d]);
    } else if (!strcmp(op, "guid")) {
        for (long i = 0; i < iters; i++)
            sink += (uintptr_t)ibv_get_device_guid(dev);
    } else {
        for (long i = 0; i < iters; i++) {
            int n;
            struct ibv_device **l = ibv_get_device_list(&n);
            if (!l)
                die("ibv_get_device_list failed");
            sink += (uintptr_t)n;
            ibv_free_device_list(l);
        }
    }
}

int main(int argc, char **argv)
{
    const char *op = argc > 1 ? argv[1] : "name";
    long iters = arg_long(argc, argv, 2, 100000);
    int batches = (int)arg_long(argc, argv, 3, 21);
    if (strcmp(op, "name") && strcmp(op, "rot") && strcmp(op, "guid") && strcmp(op, "list")) {
        fprintf(stderr, "usage: device name|rot|guid|list ITERS BATCHES\n");
        return 2;
    }

    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (!list || n == 0)
        die("no devices (is the test bed or the sim in place?)");
    struct ibv_device *dev = list[0];
    devs = list;
    ndevs = n;
    if (ibv_get_device_guid(dev) == 0)
        die("ibv_get_device_guid(%s) returned 0", ibv_get_device_name(dev));

    run(op, dev, iters > 10 ? iters / 10 : 1); /* warm-up */
    double *per = calloc((size_t)batches, sizeof *per);
    for (int b = 0; b < batches; b++) {
        double t0 = now_ns();
        run(op, dev, iters);
        per[b] = (now_ns() - t0) / (double)iters;
    }
    report_batches("ns", per, batches);
    ibv_free_device_list(list);
    return 0;
}
