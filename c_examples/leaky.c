/*
 * A deliberately leaky verbs program, for `make demo`.
 *
 * It sets up what a small RDMA application would (a protection domain, a
 * registered buffer, a completion queue and a queue pair), tears down only
 * some of it, and closes the device anyway. ibv_close_device() succeeds,
 * but what was left on the context stays allocated and can no longer be
 * used: the shim reports those orphans at the close, with the line of code
 * that created each, and again at exit.
 *
 * Compiles unchanged against rdma-core's <infiniband/verbs.h> (-libverbs)
 * or the shim's (-Iinclude -libv_shim).
 */
#include <stdio.h>
#include <stdlib.h>
#include <infiniband/verbs.h>

static char buffer[1 << 16];

int main(void)
{
	int num;
	struct ibv_device **list = ibv_get_device_list(&num);
	if (!list || num == 0) {
		fprintf(stderr, "no RDMA device\n");
		return 1;
	}
	struct ibv_context *ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!ctx) {
		perror("ibv_open_device");
		return 1;
	}

	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_mr *mr = pd ? ibv_reg_mr(pd, buffer, sizeof buffer, IBV_ACCESS_LOCAL_WRITE) : NULL;
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	struct ibv_qp_init_attr attr = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp *qp = (pd && cq) ? ibv_create_qp(pd, &attr) : NULL;
	if (!pd || !mr || !cq || !qp) {
		perror("setting up");
		return 1;
	}
	printf("set up: pd %p, mr %p (lkey 0x%x), cq %p, qp %p (qp_num %u)\n", (void *)pd, (void *)mr, mr->lkey,
	       (void *)cq, (void *)qp, qp->qp_num);

	/* The bug: the QP and the MR are forgotten; the CQ cannot be destroyed
	 * while the QP uses it (EBUSY), nor the PD while the MR and QP do. */
	printf("ibv_destroy_cq: %d\n", ibv_destroy_cq(cq));
	printf("ibv_dealloc_pd: %d\n", ibv_dealloc_pd(pd));
	printf("ibv_close_device: %d\n", ibv_close_device(ctx));
	return 0;
}
