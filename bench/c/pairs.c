/* Figure 2: create/destroy pairs on the sim, per pair.
 *
 *   pairs ITERS BATCHES [KIND|all] [ab]
 *
 * For each kind (PD, MR, CQ, QP): one warm-up batch, then BATCHES batches of
 * ITERS create+destroy pairs; prints <kind>=<median ns per pair>. The kinds
 * are interleaved batch by batch so that they share the machine's noise.
 * With KIND (pd|mr|cq|qp), only that kind (used for instruction counts).
 *
 * With "ab" (run under the shim): each batch through the program's own
 * symbols (the shim) is followed by the same batch through pointers to the
 * sim's own functions (see sim.h; the shim never sees these calls); prints
 * <kind>_ab_added=<median of the per-batch differences> and
 * <kind>_ab_mad=<their median absolute deviation>: the shim's added cost
 * measured within one process, batch against batch. */
#include "sim.h"

int main(int argc, char **argv)
{
    long iters = arg_long(argc, argv, 1, 2000);
    int batches = (int)arg_long(argc, argv, 2, 21);
    const char *only = argc > 3 ? argv[3] : "all";
    int ab = argc > 4 && !strcmp(argv[4], "ab");

    struct ibv_context *ctx = open_nth(0);
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
    static char buf[4096] __attribute__((aligned(4096)));
    if (!pd || !cq)
        die("set-up (PD, CQ)");
    struct real real;
    if (ab)
        resolve_real(&real);

    double *per[PAIR_KINDS], *diff[PAIR_KINDS];
    int first = 0, last = PAIR_KINDS - 1;
    for (int k = 0; k < PAIR_KINDS; k++)
        if (!strcmp(only, pair_names[k]))
            first = last = k;
    for (int k = first; k <= last; k++) {
        per[k] = calloc((size_t)batches, sizeof(double));
        diff[k] = calloc((size_t)batches, sizeof(double));
        for (long i = 0; i < iters / 4 + 1; i++) { /* warm-up */
            one_pair((enum pair_kind)k, ctx, pd, cq, buf);
            if (ab)
                real_pair(&real, (enum pair_kind)k, ctx, pd, cq, buf);
        }
    }
    for (int b = 0; b < batches; b++)
        for (int k = first; k <= last; k++) {
            double t0 = now_ns();
            for (long i = 0; i < iters; i++)
                one_pair((enum pair_kind)k, ctx, pd, cq, buf);
            double t1 = now_ns();
            per[k][b] = (t1 - t0) / (double)iters;
            if (ab) {
                for (long i = 0; i < iters; i++)
                    real_pair(&real, (enum pair_kind)k, ctx, pd, cq, buf);
                diff[k][b] = per[k][b] - (now_ns() - t1) / (double)iters;
            }
        }
    for (int k = first; k <= last; k++) {
        report_batches(pair_names[k], per[k], batches);
        if (ab) {
            double m = median(diff[k], batches);
            for (int b = 0; b < batches; b++)
                diff[k][b] = diff[k][b] > m ? diff[k][b] - m : m - diff[k][b];
            printf("%s_ab_added=%.3f\n%s_ab_mad=%.3f\n", pair_names[k], m, pair_names[k],
                   median(diff[k], batches));
        }
    }

    ibv_destroy_cq(cq);
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    return 0;
}
