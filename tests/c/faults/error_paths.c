/*
 * Sets up a PD, an MR and a CQ in the style of rdma-core's examples. Built
 * twice: with -DCLEANUP each error path frees what was made before it;
 * without, it returns at once (`if (!cq) return 1;`), which a fault sweep
 * must catch. With -DCRASH a failed CQ is used anyway; with -DHANG the
 * program waits forever after one.
 */
#include <stdio.h>
#include <unistd.h>
#include <infiniband/verbs.h>

static char buf[4096];

int main(void)
{
	int rc = 1;
	struct ibv_device **list = ibv_get_device_list(NULL);
	if (!list)
		return 1;
	if (!list[0]) {
		ibv_free_device_list(list);
		return 1;
	}
	struct ibv_context *ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!ctx)
		return 1;
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	if (!pd)
		goto close;
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		goto dealloc;
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
#ifdef CRASH
	if (!cq)
		printf("cqe %d\n", *(volatile int *)cq);
#endif
#ifdef HANG
	if (!cq)
		for (;;)
			pause();
#endif
	if (!cq) {
#ifndef CLEANUP
		return 1;
#else
		goto dereg;
#endif
	}
	rc = 0;
	ibv_destroy_cq(cq);
	goto dereg; /* (the label is used in every build) */
dereg:
	ibv_dereg_mr(mr);
dealloc:
	ibv_dealloc_pd(pd);
close:
	ibv_close_device(ctx);
	return rc;
}
