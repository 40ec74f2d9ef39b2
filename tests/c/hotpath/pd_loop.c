/* ibv_alloc_pd + ibv_dealloc_pd N times on the first device, for
 * instruction counts under callgrind (run on the sim).
 *
 *   pd_loop N
 *
 * Prints "ok" when every pair succeeded. */
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    long n = strtol(argv[1], NULL, 0);
    struct ibv_device **list = ibv_get_device_list(NULL);
    struct ibv_context *ctx = list && list[0] ? ibv_open_device(list[0]) : NULL;
    if (!ctx) {
        printf("no device\n");
        return 1;
    }
    for (long i = 0; i < n; i++) {
        struct ibv_pd *pd = ibv_alloc_pd(ctx);
        if (!pd || ibv_dealloc_pd(pd)) {
            printf("pair %ld failed\n", i);
            return 1;
        }
    }
    ibv_close_device(ctx);
    ibv_free_device_list(list);
    printf("ok\n");
    return 0;
}
