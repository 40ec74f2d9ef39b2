/*
 * Destroys parents while children hold them (EBUSY, and the shim names the
 * children), then the children, then retries the parents (success).
 * Prints "NAME RC" for each call and the addresses it made.
 */
#include "common.h"

static char buf[4096];

static void show(const char *what, const void *p)
{
	printf("%s 0x%lx\n", what, (unsigned long)(uintptr_t)p);
}

int main(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx = open_first(&list);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, ch, 0);
	struct ibv_srq_init_attr sattr = { .attr = { .max_wr = 8, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sattr);
	struct ibv_qp *qp = rc_qp(pd, cq, cq, srq);
	if (!pd || !mr || !ch || !cq || !srq || !qp)
		die("create");
	show("pd", pd);
	show("mr", mr);
	show("channel", ch);
	show("cq", cq);
	show("srq", srq);
	show("qp", qp);
	printf("busy dealloc_pd %d\n", ibv_dealloc_pd(pd));
	printf("busy destroy_cq %d\n", ibv_destroy_cq(cq));
	printf("busy destroy_srq %d\n", ibv_destroy_srq(srq));
	printf("busy destroy_comp_channel %d\n", ibv_destroy_comp_channel(ch));
	printf("child destroy_qp %d\n", ibv_destroy_qp(qp));
	printf("child dereg_mr %d\n", ibv_dereg_mr(mr));
	printf("retry destroy_srq %d\n", ibv_destroy_srq(srq));
	printf("retry destroy_cq %d\n", ibv_destroy_cq(cq));
	printf("retry destroy_comp_channel %d\n", ibv_destroy_comp_channel(ch));
	printf("retry dealloc_pd %d\n", ibv_dealloc_pd(pd));
	printf("close %d\n", ibv_close_device(ctx));
	ibv_free_device_list(list);
	return 0;
}
