/*
 * Destroys pointers the shim never saw created: NULL, a fake object; and a
 * QP that ibv_create_qp_ex made through the provider's table (which the
 * shim interposes, so it does see that one), also at the address of a QP
 * the shim saw destroyed. The shim must forward each unchanged: this program prints the
 * same with and without it.
 */
#include "common.h"

static struct ibv_qp *qp_ex(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr_ex attr = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
		/* CREATE_FLAGS keeps ibv_create_qp_ex off the exported ibv_create_qp. */
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS,
		.pd = pd,
	};
	return ibv_create_qp_ex(ctx, &attr);
}

int main(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx = open_first(&list);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	if (!pd || !cq)
		die("create");

	printf("null ibv_dealloc_pd %d\n", ibv_dealloc_pd(NULL));
	printf("null ibv_destroy_cq %d\n", ibv_destroy_cq(NULL));
	printf("null ibv_dereg_mr %d\n", ibv_dereg_mr(NULL));

	struct ibv_pd fake;
	memset(&fake, 0, sizeof fake);
	fake.context = ctx;
	printf("fake ibv_dealloc_pd %d\n", ibv_dealloc_pd(&fake));

	struct ibv_qp *unseen = qp_ex(ctx, pd, cq);
	if (!unseen)
		die("ibv_create_qp_ex");
	printf("unseen ibv_destroy_qp %d\n", ibv_destroy_qp(unseen));

	/* A QP the shim saw destroyed, then one it did not see, maybe at the
	 * same address: the second is still destroyed for real. */
	struct ibv_qp *seen = rc_qp(pd, cq, cq, NULL);
	if (!seen)
		die("ibv_create_qp");
	printf("seen ibv_destroy_qp %d\n", ibv_destroy_qp(seen));
	struct ibv_qp *reuse = qp_ex(ctx, pd, cq);
	if (!reuse)
		die("ibv_create_qp_ex");
	fprintf(stderr, "same-address %d 0x%lx\n", reuse == seen, (unsigned long)(uintptr_t)reuse);
	printf("reuse ibv_destroy_qp %d\n", ibv_destroy_qp(reuse));

	/* The memory of a PD the shim saw destroyed, reused by the program for
	 * something that looks live (its first word is an open context): not
	 * a double destroy, so forwarded. 24 bytes, the size of the sim's PD. */
	struct ibv_pd *gone = ibv_alloc_pd(ctx);
	if (!gone || ibv_dealloc_pd(gone))
		die("ibv_alloc_pd/ibv_dealloc_pd");
	struct ibv_pd *lookalike = malloc(24);
	lookalike->context = ctx;
	fprintf(stderr, "lookalike-same-address %d 0x%lx\n", lookalike == gone, (unsigned long)(uintptr_t)lookalike);
	printf("lookalike ibv_dealloc_pd %d\n", ibv_dealloc_pd(lookalike));
	free(lookalike);

	int a = ibv_destroy_cq(cq);
	int b = ibv_dealloc_pd(pd);
	printf("cleanup %d %d %d\n", a, b, ibv_close_device(ctx));
	ibv_free_device_list(list);
	return 0;
}
