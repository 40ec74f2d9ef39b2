/* A forwarded call, verbs against connection manager: ITERS calls of
 * ibv_get_pkey_index (a verbs call the shim only forwards and records, 3
 * arguments), ITERS of rdma_reject on an id with no connection request
 * (an rdma_* call it only forwards and records, 3 arguments; librdmacm
 * refuses it at once) and ITERS of rdma_set_option with an unknown level
 * (the same, 5 arguments), in BATCHES interleaved batches; prints each
 * one's median batch per call. Usage: cm_forward ITERS BATCHES. */
#include "bench.h"

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define MAXB 101

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 100000;
    int batches = argc > 2 ? atoi(argv[2]) : 21;
    double v[MAXB], c[MAXB], r[MAXB];
    struct ibv_device **list;
    struct ibv_context *ctx;
    struct rdma_event_channel *ch;
    struct rdma_cm_id *id;
    volatile int sink = 0;
    int n, i, b;

    if (batches > MAXB)
        batches = MAXB;
    list = ibv_get_device_list(&n);
    if (!list || n < 1 || !(ctx = ibv_open_device(list[0]))) {
        printf("error=no device\n");
        return 1;
    }
    ch = rdma_create_event_channel();
    if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
        printf("error=rdma_create_id errno %d\n", errno);
        return 1;
    }
    for (i = 0; i < iters; i++) { /* warm up both paths */
        sink += ibv_get_pkey_index(ctx, 1, 0xffff);
        sink += rdma_set_option(id, 0x7fff, 0, NULL, 0);
        sink += rdma_reject(id, NULL, 0);
    }
    for (b = 0; b < batches; b++) {
        double t0 = now_ns();
        for (i = 0; i < iters; i++)
            sink += ibv_get_pkey_index(ctx, 1, 0xffff);
        double t1 = now_ns();
        for (i = 0; i < iters; i++)
            sink += rdma_set_option(id, 0x7fff, 0, NULL, 0);
        double t2 = now_ns();
        for (i = 0; i < iters; i++)
            sink += rdma_reject(id, NULL, 0);
        double t3 = now_ns();
        v[b] = (t1 - t0) / iters;
        c[b] = (t2 - t1) / iters;
        r[b] = (t3 - t2) / iters;
    }
    printf("verbs_ns=%.2f\n", median(v, batches));
    printf("cm_ns=%.2f\n", median(c, batches));
    printf("cm3_ns=%.2f\n", median(r, batches));
    printf("sink=%d\n", sink != 0);
    rdma_destroy_id(id);
    rdma_destroy_event_channel(ch);
    ibv_close_device(ctx);
    ibv_free_device_list(list);
    return 0;
}
