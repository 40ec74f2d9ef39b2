/* Figure 3: one million live MRs.
 *
 *   scale N K ROUNDS [ab]
 *
 * Registers N memory regions on one PD (the same 64-byte buffer each time;
 * distinct 64-byte slices of one big buffer if the library refuses that),
 * and at 1k, 10k, 100k, ... live objects (up to N) times ROUNDS rounds of
 * "deregister K live MRs, register K new ones": the median per destroy and
 * per create at that size, for two victim orders (newest first: "lifo";
 * random: "rand"). Also the mean create time while filling each decade
 * (fill_ns_*) and the slowest single create (worst_create_ns: a table
 * resize shows there). With "ab" (under the shim), also ROUNDS rounds of
 * "register K MRs, deregister them" through the shim and through the sim's
 * own functions (sim.h; the shim never sees those), one after the other:
 * ab_create_ns_* and ab_destroy_ns_* are the medians of the per-round
 * differences, what the shim adds per operation with that many objects in
 * its table, free of the noise between processes. Then, with N live:
 *   rss_live_kb   peak RSS so far (getrusage), i.e. with N objects live
 *   close_ns      ibv_close_device with the N MRs and the PD orphaned
 * and the process exits without freeing anything. The work runs in a forked
 * child (before any verbs call, so the child's registry starts empty) and
 * the parent reports
 *   exit_ns       from the child's call to exit() to its reaping (the exit
 *                 report is written from a library destructor)
 *   rss_peak_kb   the child's whole-life peak RSS (wait4). */
#include "sim.h" /* first: defines _GNU_SOURCE */

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t rng = 88172645463325252ull;
static inline uint64_t xorshift(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static long maxrss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static struct ibv_pd *pd;
static char *slices;
static int distinct;

static char one[64] __attribute__((aligned(64)));

static struct ibv_mr *reg(long i)
{
    void *addr = distinct ? slices + 64 * (size_t)i : one;
    struct ibv_mr *m = ibv_reg_mr(pd, addr, 64, IBV_ACCESS_LOCAL_WRITE);
    if (!m)
        die("ibv_reg_mr #%ld", i);
    return m;
}

/* Rounds of K registrations then K deregistrations (newest first), through
 * the shim and through the sim's own functions; prints the medians of the
 * per-round differences per operation. `spare` is K slots. */
static void ab_rounds(const struct real *real, long at, int k, int rounds, long first_id,
                      struct ibv_mr **spare)
{
    double *cr = calloc((size_t)rounds, sizeof(double));
    double *de = calloc((size_t)rounds, sizeof(double));
    for (int r = 0; r < rounds; r++) {
        double t[2][2];
        for (int via = 0; via < 2; via++) {
            double t0 = now_ns();
            for (int j = 0; j < k; j++) {
                void *addr = distinct ? slices + 64 * (size_t)(first_id + j) : one;
                spare[j] = via ? real->reg_mr(pd, addr, 64, IBV_ACCESS_LOCAL_WRITE)
                               : ibv_reg_mr(pd, addr, 64, IBV_ACCESS_LOCAL_WRITE);
                if (!spare[j])
                    die("ibv_reg_mr (A/B)");
            }
            double t1 = now_ns();
            for (int j = k - 1; j >= 0; j--)
                if (via ? real->dereg_mr(spare[j]) : ibv_dereg_mr(spare[j]))
                    die("ibv_dereg_mr (A/B)");
            t[via][0] = t1 - t0;
            t[via][1] = now_ns() - t1;
        }
        cr[r] = (t[0][0] - t[1][0]) / k;
        de[r] = (t[0][1] - t[1][1]) / k;
    }
    printf("ab_create_ns_%ld=%.1f\n", at, median(cr, rounds));
    printf("ab_destroy_ns_%ld=%.1f\n", at, median(de, rounds));
    free(cr);
    free(de);
}

static int child(long n, int k, int rounds, int ab, int fd)
{
    static struct real real;
    if (ab)
        resolve_real(&real);
    struct ibv_context *ctx = open_nth(0);
    pd = ibv_alloc_pd(ctx);
    if (!pd)
        die("ibv_alloc_pd");
    long cap = n + k;
    struct ibv_mr **mrs = calloc((size_t)cap, sizeof *mrs);
    struct ibv_mr **spare = calloc((size_t)k, sizeof *spare);
    /* Does the library let one buffer be registered twice (the kernel does)? */
    mrs[0] = reg(0);
    struct ibv_mr *again = ibv_reg_mr(pd, mrs[0]->addr, 64, IBV_ACCESS_LOCAL_WRITE);
    if (again) {
        ibv_dereg_mr(again);
    } else {
        distinct = 1;
        slices = aligned_alloc(4096, 64 * (size_t)(cap + k));
        ibv_dereg_mr(mrs[0]);
        mrs[0] = reg(0);
    }
    printf("same_buffer=%d\n", !distinct);

    long live = 1, next_id = 1;
    double fill_t0 = now_ns(), worst = 0;
    double *cr = calloc((size_t)rounds, sizeof(double));
    double *de = calloc((size_t)rounds, sizeof(double));
    for (long at = 1000; at <= n; at *= 10) {
        double seg_t0 = now_ns();
        long seg_n = at - live;
        while (live < at) {
            double t0 = now_ns();
            mrs[live++] = reg(next_id++);
            double t = now_ns() - t0;
            if (t > worst)
                worst = t;
        }
        printf("fill_ns_%ld=%.1f\n", at, (now_ns() - seg_t0) / (double)(seg_n ? seg_n : 1));
        /* Two victim orders: "lifo" destroys the K newest (hot in cache:
         * shows the algorithm), "rand" destroys K random live ones (every
         * lookup cold at 1M: shows the memory hierarchy too). */
        for (int order = 0; order < 2; order++) {
            const char *name = order ? "rand" : "lifo";
            for (int r = 0; r < rounds; r++) {
                double t0 = now_ns();
                for (int j = 0; j < k; j++) {
                    long v = order ? (long)(xorshift() % (uint64_t)live) : live - 1;
                    if (ibv_dereg_mr(mrs[v]))
                        die("ibv_dereg_mr");
                    mrs[v] = mrs[--live];
                }
                double t1 = now_ns();
                for (int j = 0; j < k; j++)
                    mrs[live++] = reg(next_id++ % cap);
                double t2 = now_ns();
                de[r] = (t1 - t0) / k;
                cr[r] = (t2 - t1) / k;
            }
            printf("create_%s_ns_%ld=%.1f\n", name, at, median(cr, rounds));
            printf("destroy_%s_ns_%ld=%.1f\n", name, at, median(de, rounds));
        }
        if (ab)
            ab_rounds(&real, at, k, rounds, cap, spare);
        printf("rss_kb_%ld=%ld\n", at, maxrss_kb());
        fflush(stdout);
    }
    while (live < n)
        mrs[live++] = reg(next_id++ % cap);
    printf("worst_create_ns=%.0f\n", worst);
    printf("fill_s=%.3f\n", (now_ns() - fill_t0) / 1e9);
    printf("live=%ld\n", live);
    printf("rss_live_kb=%ld\n", maxrss_kb());
    fflush(stdout);

    double t0 = now_ns();
    if (ibv_close_device(ctx))
        die("ibv_close_device");
    printf("close_ns=%.0f\n", now_ns() - t0);
    fflush(stdout);
    double t_exit = now_ns();
    if (write(fd, &t_exit, sizeof t_exit) != sizeof t_exit)
        return 1;
    exit(0); /* the objects stay orphaned: the exit report lists them */
}

int main(int argc, char **argv)
{
    long n = arg_long(argc, argv, 1, 1000000);
    int k = (int)arg_long(argc, argv, 2, 100);
    int rounds = (int)arg_long(argc, argv, 3, 15);
    int ab = argc > 4 && !strcmp(argv[4], "ab");
    int p[2];
    if (pipe(p))
        die("pipe");
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        close(p[0]);
        return child(n, k, rounds, ab, p[1]);
    }
    close(p[1]);
    double t_exit = 0;
    ssize_t got = read(p[0], &t_exit, sizeof t_exit);
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) < 0)
        die("wait4");
    double t_end = now_ns();
    if (got != sizeof t_exit || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        printf("error=1\nstatus=%d\n", status);
        return 1;
    }
    printf("exit_ns=%.0f\n", t_end - t_exit);
    printf("rss_peak_kb=%ld\n", ru.ru_maxrss);
    return 0;
}
