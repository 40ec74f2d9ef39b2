/* Memory windows on the sim: alloc / dealloc with the provider's errno,
 * type 1 binds through ibv_bind_mw, type 2 binds through IBV_WR_BIND_MW
 * and ibv_wr_bind_mw, invalidation (IBV_WR_LOCAL_INV, IBV_WR_SEND_WITH_INV),
 * and the responder's checks of a window's rkey: range, access, bound or
 * not, the MR still registered. */
#include "rc_pair.h"

#define ALL_REMOTE (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
		    IBV_ACCESS_REMOTE_ATOMIC)

static struct ibv_wc bind1(struct side *b, struct ibv_mw *mw, struct ibv_mr *mr, void *addr,
			   uint64_t len, unsigned access, int expect)
{
	struct ibv_mw_bind mb = { .wr_id = 50, .send_flags = IBV_SEND_SIGNALED,
				  .bind_info = { .mr = mr, .addr = (uintptr_t)addr,
						 .length = len, .mw_access_flags = access } };
	CHECK(ibv_bind_mw(b->qp, mw, &mb) == expect);
	if (expect)
		return (struct ibv_wc){ 0 };
	struct ibv_wc wc = poll_one(b->cq);
	CHECK(wc.wr_id == 50 && wc.opcode == IBV_WC_BIND_MW);
	return wc;
}

static enum ibv_wc_status bind2(struct side *b, struct ibv_mw *mw, uint32_t rkey, struct ibv_mr *mr,
				void *addr, uint64_t len, unsigned access)
{
	struct ibv_send_wr wr = { .wr_id = 60, .opcode = IBV_WR_BIND_MW,
				  .send_flags = IBV_SEND_SIGNALED }, *bad = NULL;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = rkey;
	wr.bind_mw.bind_info = (struct ibv_mw_bind_info){ .mr = mr, .addr = (uintptr_t)addr,
							   .length = len,
							   .mw_access_flags = access };
	CHECK(ibv_post_send(b->qp, &wr, &bad) == 0);
	struct ibv_wc wc = poll_one(b->cq);
	CHECK(wc.wr_id == 60);
	CHECK(wc.status != IBV_WC_SUCCESS || wc.opcode == IBV_WC_BIND_MW);
	return wc.status;
}

int main(void)
{
	struct ibv_device **list = two_devices();
	static struct side a, b;
	setup(&a, list[0], ALL_REMOTE);
	setup(&b, list[1], ALL_REMOTE | IBV_ACCESS_MW_BIND);
	reconnect(&a, &b);

	/* The device says it has windows. */
	struct ibv_device_attr da;
	CHECK(ibv_query_device(b.ctx, &da) == 0);
	CHECK(da.max_mw > 0 && (da.device_cap_flags & IBV_DEVICE_MEM_WINDOW));
	CHECK(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B);

	/* Allocation: type 1 and 2; another type is EINVAL. */
	struct ibv_mw *mw1 = ibv_alloc_mw(b.pd, IBV_MW_TYPE_1);
	struct ibv_mw *mw2 = ibv_alloc_mw(b.pd, IBV_MW_TYPE_2);
	CHECK(mw1 && mw2 && mw1->pd == b.pd && mw1->context == b.ctx);
	CHECK(mw1->type == IBV_MW_TYPE_1 && mw2->type == IBV_MW_TYPE_2 && mw1->rkey != mw2->rkey);
	CHECK_ERRNO(ibv_alloc_mw(b.pd, (enum ibv_mw_type)3), EINVAL);
	/* A PD with a window is busy. */
	CHECK(ibv_dealloc_pd(b.pd) == EBUSY);

	/* An unbound window's rkey gives nothing. */
	CHECK(rdma(&a, IBV_WR_RDMA_WRITE, a.buf, 8, (uintptr_t)b.buf, mw1->rkey) ==
	      IBV_WC_REM_ACCESS_ERR);
	reconnect(&a, &b);

	/* Type 1: bind b.buf[64..128) for remote read and write. */
	uint32_t before = mw1->rkey;
	struct ibv_wc wc = bind1(&b, mw1, b.mr, &b.buf[64], 64 * 8,
				 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE, 0);
	CHECK(wc.status == IBV_WC_SUCCESS);
	CHECK(mw1->rkey == ibv_inc_rkey(before) && mw1->rkey != before);
	strcpy((char *)a.buf, "through a window");
	CHECK(rdma(&a, IBV_WR_RDMA_WRITE, a.buf, 17, (uintptr_t)&b.buf[70], mw1->rkey) ==
	      IBV_WC_SUCCESS);
	CHECK(strcmp((char *)&b.buf[70], "through a window") == 0);
	memset(&a.buf[8], 0, 32);
	CHECK(rdma(&a, IBV_WR_RDMA_READ, &a.buf[8], 17, (uintptr_t)&b.buf[70], mw1->rkey) ==
	      IBV_WC_SUCCESS);
	CHECK(strcmp((char *)&a.buf[8], "through a window") == 0);
	/* Past the window's end, before its start, without atomic access, or
	 * with the rkey the bind replaced: REM_ACCESS_ERR. */
	CHECK(rdma(&a, IBV_WR_RDMA_WRITE, a.buf, 16, (uintptr_t)&b.buf[127], mw1->rkey) ==
	      IBV_WC_REM_ACCESS_ERR);
	reconnect(&a, &b);
	CHECK(rdma(&a, IBV_WR_RDMA_READ, a.buf, 8, (uintptr_t)&b.buf[63], mw1->rkey) ==
	      IBV_WC_REM_ACCESS_ERR);
	reconnect(&a, &b);
	CHECK(rdma(&a, IBV_WR_ATOMIC_FETCH_AND_ADD, a.buf, 8, (uintptr_t)&b.buf[64], mw1->rkey) ==
	      IBV_WC_REM_ACCESS_ERR);
	reconnect(&a, &b);
	CHECK(rdma(&a, IBV_WR_RDMA_WRITE, a.buf, 8, (uintptr_t)&b.buf[64], before) ==
	      IBV_WC_REM_ACCESS_ERR);
	reconnect(&a, &b);

	/* Bind errors the provider finds: a type 2 window through ibv_bind_mw
	 * (EINVAL), an MR of another PD (EPERM), zero-based (EINVAL). */
	struct ibv_pd *pd2 = ibv_alloc_pd(b.ctx);
	struct ibv_mr *other = ibv_reg_mr(pd2, &b.buf[256], 64, ALL_REMOTE | IBV_ACCESS_MW_BIND);
	CHECK(pd2 && other);
	bind1(&b, mw2, b.mr, &b.buf[64], 8, IBV_ACCESS_REMOTE_READ, EINVAL);
	bind1(&b, mw1, other, &b.buf[256], 8, IBV_ACCESS_REMOTE_READ, EPERM);
	bind1(&b, mw1, b.mr, &b.buf[64], 8, IBV_ACCESS_ZERO_BASED, EINVAL);
	/* Bind errors the HCA finds: an MR without MW_BIND, a range outside
	 * the MR: IBV_WC_MW_BIND_ERR, and the window keeps its binding. */
	struct ibv_mr *nobind = ibv_reg_mr(b.pd, &b.buf[300], 64, ALL_REMOTE);
	CHECK(nobind);
	wc = bind1(&b, mw1, nobind, &b.buf[300], 8, IBV_ACCESS_REMOTE_READ, 0);
	CHECK(wc.status == IBV_WC_MW_BIND_ERR);
	reconnect(&a, &b);
	wc = bind1(&b, mw1, b.mr, &b.buf[500], 64 * 8, IBV_ACCESS_REMOTE_READ, 0);
	CHECK(wc.status == IBV_WC_MW_BIND_ERR);
	reconnect(&a, &b);
	CHECK(ibv_dereg_mr(nobind) == 0);

	/* Unbinding (type 1: no MR, length 0) closes the window. */
	wc = bind1(&b, mw1, NULL, NULL, 0, 0, 0);
	CHECK(wc.status == IBV_WC_SUCCESS);
	CHECK(rdma(&a, IBV_WR_RDMA_READ, a.buf, 8, (uintptr_t)&b.buf[70], mw1->rkey) ==
	      IBV_WC_REM_ACCESS_ERR);
	reconnect(&a, &b);

	/* Type 2 through IBV_WR_BIND_MW: the new rkey must keep the index. */
	uint32_t k2 = ibv_inc_rkey(mw2->rkey);
	CHECK(bind2(&b, mw2, k2 ^ 0x100, b.mr, &b.buf[128], 64, IBV_ACCESS_REMOTE_WRITE) ==
	      IBV_WC_MW_BIND_ERR);
	reconnect(&a, &b);
	CHECK(bind2(&b, mw2, k2, b.mr, &b.buf[128], 64, IBV_ACCESS_REMOTE_WRITE) ==
	      IBV_WC_SUCCESS);
	CHECK(rdma(&a, IBV_WR_RDMA_WRITE, a.buf, 8, (uintptr_t)&b.buf[128], k2) == IBV_WC_SUCCESS);
	CHECK(b.buf[128] == a.buf[0]);
	/* Write only: a READ through it is refused. */
	CHECK(rdma(&a, IBV_WR_RDMA_READ, a.buf, 8, (uintptr_t)&b.buf[128], k2) ==
	      IBV_WC_REM_ACCESS_ERR);
	reconnect(&a, &b);
	/* Reconnecting kept the binding; a bound type 2 window cannot be
	 * bound again. */
	CHECK(bind2(&b, mw2, ibv_inc_rkey(k2), b.mr, &b.buf[128], 64, IBV_ACCESS_REMOTE_WRITE) ==
	      IBV_WC_MW_BIND_ERR);
	reconnect(&a, &b);

	/* SEND_WITH_INV invalidates it at the receiver. */
	post_recv(&b, 70, &b.buf[400], 64);
	CHECK(post_rdma(&a, IBV_WR_SEND_WITH_INV, 71, a.buf, 8, a.mr->lkey, 0, k2) == 0);
	wc = poll_one(a.cq);
	CHECK(wc.wr_id == 71 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND);
	wc = poll_one(b.cq);
	CHECK(wc.wr_id == 70 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV);
	CHECK((wc.wc_flags & IBV_WC_WITH_INV) && wc.invalidated_rkey == k2);
	CHECK(rdma(&a, IBV_WR_RDMA_WRITE, a.buf, 8, (uintptr_t)&b.buf[128], k2) ==
	      IBV_WC_REM_ACCESS_ERR);
	reconnect(&a, &b);

	/* Bound again (a new rkey), then IBV_WR_LOCAL_INV; invalidating it a
	 * second time fails. */
	uint32_t k3 = ibv_inc_rkey(k2);
	CHECK(bind2(&b, mw2, k3, b.mr, &b.buf[128], 64, IBV_ACCESS_REMOTE_READ) == IBV_WC_SUCCESS);
	CHECK(rdma(&a, IBV_WR_RDMA_READ, a.buf, 8, (uintptr_t)&b.buf[128], k3) == IBV_WC_SUCCESS);
	struct ibv_send_wr inv = { .wr_id = 80, .opcode = IBV_WR_LOCAL_INV,
				   .send_flags = IBV_SEND_SIGNALED }, *bad = NULL;
	inv.invalidate_rkey = k3;
	CHECK(ibv_post_send(b.qp, &inv, &bad) == 0);
	wc = poll_one(b.cq);
	CHECK(wc.wr_id == 80 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_LOCAL_INV);
	CHECK(rdma(&a, IBV_WR_RDMA_READ, a.buf, 8, (uintptr_t)&b.buf[128], k3) ==
	      IBV_WC_REM_ACCESS_ERR);
	reconnect(&a, &b);
	CHECK(ibv_post_send(b.qp, &inv, &bad) == 0);
	wc = poll_one(b.cq);
	CHECK(wc.wr_id == 80 && wc.status != IBV_WC_SUCCESS);
	reconnect(&a, &b);

	/* A window bound to an MR that is then deregistered gives nothing. */
	struct ibv_mr *tmp = ibv_reg_mr(b.pd, &b.buf[200], 64, ALL_REMOTE | IBV_ACCESS_MW_BIND);
	CHECK(tmp);
	CHECK(bind1(&b, mw1, tmp, &b.buf[200], 64, IBV_ACCESS_REMOTE_READ, 0).status ==
	      IBV_WC_SUCCESS);
	CHECK(rdma(&a, IBV_WR_RDMA_READ, a.buf, 8, (uintptr_t)&b.buf[200], mw1->rkey) ==
	      IBV_WC_SUCCESS);
	CHECK(ibv_dereg_mr(tmp) == 0);
	CHECK(rdma(&a, IBV_WR_RDMA_READ, a.buf, 8, (uintptr_t)&b.buf[200], mw1->rkey) ==
	      IBV_WC_REM_ACCESS_ERR);
	reconnect(&a, &b);

	/* Type 2 through the extended post API (ibv_wr_bind_mw). */
	struct ibv_qp_init_attr_ex qx = {
		.send_cq = b.cq, .recv_cq = b.cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, .pd = b.pd,
		.send_ops_flags = IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV |
				  IBV_QP_EX_WITH_SEND_WITH_INV | IBV_QP_EX_WITH_RDMA_WRITE
	};
	struct ibv_qp *plain = b.qp;
	b.qp = ibv_create_qp_ex(b.ctx, &qx);
	CHECK(b.qp);
	reconnect(&a, &b);
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(b.qp);
	CHECK(x);
	uint32_t k4 = ibv_inc_rkey(k3);
	struct ibv_mw_bind_info bi = { .mr = b.mr, .addr = (uintptr_t)&b.buf[128], .length = 64,
				       .mw_access_flags = IBV_ACCESS_REMOTE_WRITE };
	ibv_wr_start(x);
	x->wr_id = 90;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(x, mw2, k4, &bi);
	CHECK(ibv_wr_complete(x) == 0);
	wc = poll_one(b.cq);
	CHECK(wc.wr_id == 90 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW);
	CHECK(rdma(&a, IBV_WR_RDMA_WRITE, a.buf, 8, (uintptr_t)&b.buf[128], k4) == IBV_WC_SUCCESS);
	ibv_wr_start(x);
	x->wr_id = 91;
	ibv_wr_local_inv(x, k4);
	CHECK(ibv_wr_complete(x) == 0);
	wc = poll_one(b.cq);
	CHECK(wc.wr_id == 91 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_LOCAL_INV);
	CHECK(rdma(&a, IBV_WR_RDMA_WRITE, a.buf, 8, (uintptr_t)&b.buf[128], k4) ==
	      IBV_WC_REM_ACCESS_ERR);

	/* Teardown: windows first, then the PD is free again. */
	CHECK(ibv_destroy_qp(b.qp) == 0);
	b.qp = plain;
	CHECK(ibv_dealloc_mw(mw1) == 0 && ibv_dealloc_mw(mw2) == 0);
	CHECK(ibv_dereg_mr(other) == 0 && ibv_dealloc_pd(pd2) == 0);
	CHECK(ibv_destroy_qp(b.qp) == 0 && ibv_dereg_mr(b.mr) == 0);
	CHECK(ibv_dealloc_pd(b.pd) == 0);
	DONE("obj_mw");
}
