/* footprint N: opens the first device, registers N 64-byte MRs on one PD
 * (distinct slices of one buffer) and prints what the process has in
 * memory with them live, from /proc/self/smaps:
 *   rss_kb        resident memory, every mapping
 *   shim_file_kb  resident pages of mappings of libibv_shim.so (its code,
 *                 read-only data, relocated and written data; 0 direct)
 * then frees everything. */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what)
{
    fprintf(stderr, "footprint: %s failed\n", what);
    exit(1);
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000;
    int nd = 0;
    struct ibv_device **list = ibv_get_device_list(&nd);
    if (!list || nd == 0)
        die("ibv_get_device_list");
    struct ibv_context *ctx = ibv_open_device(list[0]);
    if (!ctx)
        die("ibv_open_device");
    ibv_free_device_list(list);
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    if (!pd)
        die("ibv_alloc_pd");
    char *buf = aligned_alloc(4096, 64 * (size_t)n);
    struct ibv_mr **mrs = calloc((size_t)n, sizeof *mrs);
    if (!buf || !mrs)
        die("malloc");
    for (long i = 0; i < n; i++)
        if (!(mrs[i] = ibv_reg_mr(pd, buf + 64 * i, 64, IBV_ACCESS_LOCAL_WRITE)))
            die("ibv_reg_mr");

    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        die("fopen /proc/self/smaps");
    char line[4096];
    long rss = 0, shim = 0;
    int in_shim = 0;
    while (fgets(line, sizeof line, f)) {
        long kb;
        unsigned long lo, hi;
        /* A mapping's header: "lo-hi perms offset dev inode [path]" (a
         * field line such as "AnonHugePages:" fails the second number). */
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2)
            in_shim = strstr(line, "/libibv_shim.so") != NULL;
        if (sscanf(line, "Rss: %ld kB", &kb) == 1) {
            rss += kb;
            if (in_shim)
                shim += kb;
        }
    }
    fclose(f);
    printf("rss_kb=%ld\nshim_file_kb=%ld\n", rss, shim);

    for (long i = 0; i < n; i++)
        if (ibv_dereg_mr(mrs[i]))
            die("ibv_dereg_mr");
    free(mrs);
    free(buf);
    if (ibv_dealloc_pd(pd))
        die("ibv_dealloc_pd");
    if (ibv_close_device(ctx))
        die("ibv_close_device");
    return 0;
}
