/* Figure 4: create/destroy throughput of two threads on separate contexts
 * against one thread.
 *
 *   threads MS REPS [ab]
 *
 * Opens two contexts (devices 0 and 1, or device 0 twice), each with its
 * own PD and CQ. Each round of work is one PD, MR, CQ and QP create/destroy
 * pair on the thread's own context. REPS times, alternately: one thread on
 * context 0 for MS milliseconds, then two threads (contexts 0 and 1) for MS
 * milliseconds. Prints the median rounds per second of each and the median
 * of the per-repetition ratios (two / one).
 *
 * The same alternation with a loop that only computes (no verbs, no locks,
 * no memory), half as long, measures what the machine gives two threads at
 * that moment: machine_ratio (2.0 on two idle cores; less when other work
 * competes for them).
 *
 * With "ab" (run under the shim), each repetition also runs the one- and
 * two-thread phases through pointers to the sim's own functions (sim.h),
 * which the shim never sees: real_ratio is the sim's own scaling at the
 * same moment, the ceiling for the shim's. */
#include "sim.h" /* first: defines _GNU_SOURCE */

#include <pthread.h>

struct worker {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    char buf[4096] __attribute__((aligned(4096)));
    pthread_t thread;
    double deadline;
    long rounds;
    int spin;
    const struct real *via; /* NULL: through the program's symbols */
    uint64_t sink;
} __attribute__((aligned(64)));

static pthread_barrier_t start;

static void *work(void *arg)
{
    struct worker *w = arg;
    pthread_barrier_wait(&start);
    long r = 0;
    uint64_t x = 88172645463325252ull + (uintptr_t)w;
    while (now_ns() < w->deadline) {
        if (w->spin) {
            for (int i = 0; i < 1000; i++) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
            }
        } else if (w->via) {
            for (int k = 0; k < PAIR_KINDS; k++)
                real_pair(w->via, (enum pair_kind)k, w->ctx, w->pd, w->cq, w->buf);
        } else {
            for (int k = 0; k < PAIR_KINDS; k++)
                one_pair((enum pair_kind)k, w->ctx, w->pd, w->cq, w->buf);
        }
        r++;
    }
    w->rounds = r;
    w->sink = x;
    return NULL;
}

/* Runs `n` workers (computing only when `spin`; through `via` when not
 * NULL) for `ms` milliseconds; returns rounds per second. */
static double run(struct worker *ws, int n, long ms, int spin, const struct real *via)
{
    for (int i = 0; i < n; i++) {
        ws[i].spin = spin;
        ws[i].via = via;
    }
    pthread_barrier_init(&start, NULL, (unsigned)n + 1);
    for (int i = 0; i < n; i++)
        if (pthread_create(&ws[i].thread, NULL, work, &ws[i]))
            die("pthread_create");
    double t0 = now_ns();
    for (int i = 0; i < n; i++)
        ws[i].deadline = t0 + (double)ms * 1e6;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    pthread_barrier_wait(&start);
    long total = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(ws[i].thread, NULL);
        total += ws[i].rounds;
    }
    double t1 = now_ns();
    pthread_barrier_destroy(&start);
    return (double)total / ((t1 - t0) / 1e9);
}

int main(int argc, char **argv)
{
    long ms = arg_long(argc, argv, 1, 300);
    int reps = (int)arg_long(argc, argv, 2, 7);
    int ab = argc > 3 && !strcmp(argv[3], "ab");
    static struct real real;
    if (ab)
        resolve_real(&real);
    static struct worker ws[2];
    for (int i = 0; i < 2; i++) {
        ws[i].ctx = open_nth(i);
        ws[i].pd = ibv_alloc_pd(ws[i].ctx);
        ws[i].cq = ibv_create_cq(ws[i].ctx, 64, NULL, NULL, 0);
        if (!ws[i].pd || !ws[i].cq)
            die("set-up (PD, CQ)");
    }
    run(ws, 2, ms / 4 + 1, 0, NULL); /* warm-up */
    if (ab)
        run(ws, 2, ms / 4 + 1, 0, &real);
    double *one = calloc((size_t)reps, sizeof(double));
    double *two = calloc((size_t)reps, sizeof(double));
    double *ratio = calloc((size_t)reps, sizeof(double));
    double *machine = calloc((size_t)reps, sizeof(double));
    double *rone = calloc((size_t)reps, sizeof(double));
    double *rtwo = calloc((size_t)reps, sizeof(double));
    double *rratio = calloc((size_t)reps, sizeof(double));
    for (int r = 0; r < reps; r++) {
        double s1 = run(ws, 1, ms / 2, 1, NULL);
        double s2 = run(ws, 2, ms / 2, 1, NULL);
        machine[r] = s2 / s1;
        one[r] = run(ws, 1, ms, 0, NULL);
        two[r] = run(ws, 2, ms, 0, NULL);
        ratio[r] = two[r] / one[r];
        if (ab) {
            rone[r] = run(ws, 1, ms, 0, &real);
            rtwo[r] = run(ws, 2, ms, 0, &real);
            rratio[r] = rtwo[r] / rone[r];
        }
    }
    printf("one_per_s=%.0f\n", median(one, reps));
    printf("two_per_s=%.0f\n", median(two, reps));
    printf("ratio=%.3f\n", median(ratio, reps));
    printf("machine_ratio=%.3f\n", median(machine, reps));
    if (ab) {
        printf("real_one_per_s=%.0f\n", median(rone, reps));
        printf("real_two_per_s=%.0f\n", median(rtwo, reps));
        printf("real_ratio=%.3f\n", median(rratio, reps));
    }
    for (int i = 0; i < 2; i++) {
        ibv_destroy_cq(ws[i].cq);
        ibv_dealloc_pd(ws[i].pd);
        ibv_close_device(ws[i].ctx);
    }
    return 0;
}
