/* Figure 3b: the cost of ibv_close_device is the closing context's own
 * objects, not every object of the process.
 *
 *   close N ROUNDS
 *
 * ROUNDS times "open a context on device 1, close it" (clean: it owns
 * nothing) with no other object live: close_clean_ns_0 (median). Then N PDs
 * are allocated on a context of device 0 and kept live, and the same again:
 * close_clean_ns_N. close_ratio = close_clean_ns_N / close_clean_ns_0 (the
 * budget: <= 2). Then ROUNDS cycles of "open, allocate one PD, close" that
 * leak the PD each time (the close reports it, and it stays tracked as a
 * zombie): leak_close_ns_first and leak_close_ns_last are the medians of the
 * first and last tenth of those closes; a close that scanned every object
 * would grow with each cycle. Exits without freeing the N PDs. */
#include "sim.h" /* first: defines _GNU_SOURCE */

#include <unistd.h>

static double close_median(int rounds, int leak)
{
    double *t = calloc((size_t)rounds, sizeof(double));
    for (int r = 0; r < rounds; r++) {
        struct ibv_context *c = open_nth(1);
        if (leak && !ibv_alloc_pd(c))
            die("ibv_alloc_pd");
        double t0 = now_ns();
        if (ibv_close_device(c))
            die("ibv_close_device");
        t[r] = now_ns() - t0;
    }
    double m = median(t, rounds);
    free(t);
    return m;
}

int main(int argc, char **argv)
{
    long n = arg_long(argc, argv, 1, 1000000);
    int rounds = (int)arg_long(argc, argv, 2, 201);
    double clean0 = close_median(rounds, 0);
    struct ibv_context *ctx = open_nth(0);
    for (long i = 0; i < n; i++)
        if (!ibv_alloc_pd(ctx))
            die("ibv_alloc_pd #%ld", i);
    double cleann = close_median(rounds, 0);
    printf("live=%ld\n", n);
    printf("close_clean_ns_0=%.0f\n", clean0);
    printf("close_clean_ns_n=%.0f\n", cleann);
    printf("close_ratio=%.3f\n", cleann / clean0);
    int tenth = rounds / 10 > 0 ? rounds / 10 : 1;
    double first = close_median(tenth, 1);
    close_median(rounds - 2 * tenth > 0 ? rounds - 2 * tenth : 1, 1);
    double last = close_median(tenth, 1);
    printf("leak_close_ns_first=%.0f\n", first);
    printf("leak_close_ns_last=%.0f\n", last);
    fflush(stdout);
    _exit(0); /* no exit report of N objects: not what is measured here */
}
