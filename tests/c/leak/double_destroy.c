/*
 * Destroys each kind of object twice. rdma-core would read freed memory on
 * the second call; the shim refuses it with EINVAL. Prints "NAME RC RC".
 */
#include "common.h"

static char buf[4096];

int main(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx = open_first(&list);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_pd *pd2 = ibv_alloc_pd(ctx);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, ch, 0);
	struct ibv_qp *qp = rc_qp(pd, cq, cq, NULL);
	struct ibv_srq_init_attr sattr = { .attr = { .max_wr = 8, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sattr);
	struct ibv_ah_attr aattr = { .dlid = 5, .port_num = 1 };
	struct ibv_ah *ah = ibv_create_ah(pd, &aattr);
	if (!pd || !pd2 || !mr || !ch || !cq || !qp || !srq || !ah)
		die("create");
	int a, b;
	a = ibv_destroy_qp(qp);
	b = ibv_destroy_qp(qp);
	printf("ibv_destroy_qp %d %d\n", a, b);
	a = ibv_destroy_ah(ah);
	b = ibv_destroy_ah(ah);
	printf("ibv_destroy_ah %d %d\n", a, b);
	a = ibv_destroy_srq(srq);
	b = ibv_destroy_srq(srq);
	printf("ibv_destroy_srq %d %d\n", a, b);
	a = ibv_destroy_cq(cq);
	b = ibv_destroy_cq(cq);
	printf("ibv_destroy_cq %d %d\n", a, b);
	a = ibv_destroy_comp_channel(ch);
	b = ibv_destroy_comp_channel(ch);
	printf("ibv_destroy_comp_channel %d %d\n", a, b);
	a = ibv_dereg_mr(mr);
	b = ibv_dereg_mr(mr);
	printf("ibv_dereg_mr %d %d\n", a, b);
	a = ibv_dealloc_pd(pd);
	errno = 0;
	b = ibv_dealloc_pd(pd);
	printf("ibv_dealloc_pd %d %d errno %d\n", a, b, errno);
	/* The address is reused by the next PD: that one is destroyed normally. */
	struct ibv_pd *again = ibv_alloc_pd(ctx);
	printf("reused %d\n", again == pd);
	printf("ibv_dealloc_pd-again %d\n", ibv_dealloc_pd(again));
	printf("ibv_dealloc_pd-pd2 %d\n", ibv_dealloc_pd(pd2));
	printf("close %d\n", ibv_close_device(ctx));
	ibv_free_device_list(list);
	return 0;
}
