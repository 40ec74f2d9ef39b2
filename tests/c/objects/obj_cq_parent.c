/* An extended CQ on a parent domain (IBV_CQ_INIT_ATTR_MASK_PD; pyverbs'
 * test_mem_align_srq_excq_rc_traffic), as mlx5 has it: the parent domain
 * must be one of this context (a plain PD or none is EINVAL), it is held
 * (EBUSY) while the CQ lives, and the CQ works as any other. */
#include <infiniband/verbs.h>

#include "check.h"

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	CHECK(list && list[0] && list[1]);
	struct ibv_context *ctx = ibv_open_device(list[0]), *other = ibv_open_device(list[1]);
	CHECK(ctx && other);
	struct ibv_pd *pd = ibv_alloc_pd(ctx), *opd = ibv_alloc_pd(other);
	CHECK(pd && opd);
	struct ibv_parent_domain_init_attr pa = { .pd = pd };
	struct ibv_pd *parent = ibv_alloc_parent_domain(ctx, &pa);
	pa.pd = opd;
	struct ibv_pd *oparent = ibv_alloc_parent_domain(other, &pa);
	CHECK(parent && oparent);

	struct ibv_cq_init_attr_ex ca = { .cqe = 8, .wc_flags = IBV_WC_STANDARD_FLAGS,
					  .comp_mask = IBV_CQ_INIT_ATTR_MASK_PD };
	CHECK_ERRNO(ibv_create_cq_ex(ctx, &ca), EINVAL);
	ca.parent_domain = pd;
	CHECK_ERRNO(ibv_create_cq_ex(ctx, &ca), EINVAL);
	ca.parent_domain = oparent;
	CHECK_ERRNO(ibv_create_cq_ex(ctx, &ca), EINVAL);
	ca.parent_domain = parent;
	struct ibv_cq_ex *cq = ibv_create_cq_ex(ctx, &ca);
	CHECK(cq);
	CHECK(ibv_dealloc_pd(parent) == EBUSY);

	/* It completes work as any CQ: a QP on the parent domain posting a
	 * send that flushes (the QP is moved to the error state). */
	struct ibv_qp_init_attr qa = { .send_cq = ibv_cq_ex_to_cq(cq), .recv_cq = ibv_cq_ex_to_cq(cq),
				       .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 2, .max_recv_wr = 2,
						.max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *qp = ibv_create_qp(parent, &qa);
	CHECK(qp);
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	CHECK(ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					     IBV_QP_ACCESS_FLAGS) == 0);
	at.qp_state = IBV_QPS_ERR;
	CHECK(ibv_modify_qp(qp, &at, IBV_QP_STATE) == 0);
	struct ibv_recv_wr rw = { .wr_id = 77 }, *bad;
	CHECK(ibv_post_recv(qp, &rw, &bad) == 0);
	struct ibv_poll_cq_attr pca = { 0 };
	CHECK(ibv_start_poll(cq, &pca) == 0);
	CHECK(cq->wr_id == 77 && cq->status == IBV_WC_WR_FLUSH_ERR);
	ibv_end_poll(cq);
	CHECK(ibv_destroy_qp(qp) == 0);

	CHECK(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)) == 0);
	CHECK(ibv_dealloc_pd(parent) == 0 && ibv_dealloc_pd(oparent) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0 && ibv_dealloc_pd(opd) == 0);
	CHECK(ibv_close_device(ctx) == 0 && ibv_close_device(other) == 0);
	DONE("obj_cq_parent");
}
