/* Shared helpers for the benchmark programs: a monotonic clock, medians,
 * and the output convention (one "key=value" pair per line on stdout, read
 * by bench/run.sh). Each program warms up, then times BATCHES batches of
 * ITERS operations and reports the median batch (per operation) and the
 * fastest one. */
#ifndef IBV_BENCH_H
#define IBV_BENCH_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dlvsym, RTLD_NOLOAD */
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of v[0..n) (sorts v in place). */
static inline double median(double *v, int n)
{
    if (n <= 0)
        return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static inline long arg_long(int argc, char **argv, int i, long dflt)
{
    return argc > i ? strtol(argv[i], NULL, 0) : dflt;
}

/* Prints the median and fastest per-operation time of `n` batches. */
static inline void report_batches(const char *key, double *per_op, int n)
{
    double m = median(per_op, n);
    printf("%s=%.3f\n%s_min=%.3f\n", key, m, key, per_op[0]);
}

#define die(...)                                                               \
    do {                                                                       \
        int e_ = errno;                                                        \
        fprintf(stderr, __VA_ARGS__);                                          \
        fprintf(stderr, " (errno %d: %s)\n", e_, strerror(e_));                \
        printf("error=1\n");                                                   \
        exit(2);                                                               \
    } while (0)

#endif
