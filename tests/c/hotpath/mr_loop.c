/* ibv_reg_mr + ibv_dereg_mr of one 4 KiB buffer N times on a PD of the
 * first device, for instruction counts under callgrind (run on the sim).
 *
 *   mr_loop N
 *
 * Prints "ok" when every pair succeeded. */
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>

static char buf[4096];

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    long n = strtol(argv[1], NULL, 0);
    struct ibv_device **list = ibv_get_device_list(NULL);
    struct ibv_context *ctx = list && list[0] ? ibv_open_device(list[0]) : NULL;
    struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
    if (!pd) {
        printf("no device\n");
        return 1;
    }
    for (long i = 0; i < n; i++) {
        struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
        if (!mr || ibv_dereg_mr(mr)) {
            printf("pair %ld failed\n", i);
            return 1;
        }
    }
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    ibv_free_device_list(list);
    printf("ok\n");
    return 0;
}
