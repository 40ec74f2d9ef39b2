/* XRC beyond sends (pyverbs' test_atomic XRC cases): RDMA WRITE (with
 * immediate), READ and both atomics from an XRC send QP through an XRC
 * receive QP, the target's memory checked against the PD of the XRC SRQ
 * the request names (an MR of another PD is IBV_WC_REM_ACCESS_ERR), the
 * immediate taking a receive of that SRQ; the extended post API accepts
 * the same operations on an XRC send QP. */
#include <infiniband/verbs.h>
#include <stdint.h>

#include "check.h"
#include "xrc.h"

#define REMOTE (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
		IBV_ACCESS_REMOTE_ATOMIC)

/* The receive QP takes remote writes, READs and atomics, 4 in flight. */
static void connect(struct ibv_qp *qp, uint32_t dest_qpn, uint16_t dlid, int recv)
{
	xrc_connect(qp, dest_qpn, dlid, recv, REMOTE & ~IBV_ACCESS_LOCAL_WRITE, 4);
}

static struct ibv_qp *send_qp;
static struct ibv_cq *send_cq;
static uint32_t srqn;

/* Posts one signaled request to the SRQ srqn; returns its status. */
static enum ibv_wc_status post(enum ibv_wr_opcode op, void *addr, uint32_t len, uint32_t lkey,
			       uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = { (uintptr_t)addr, len, lkey };
	struct ibv_send_wr wr = { .wr_id = 9, .sg_list = &sge, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED, .imm_data = htobe32(5) }, *bad;
	wr.qp_type.xrc.remote_srqn = srqn;
	if (op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = op == IBV_WR_ATOMIC_CMP_AND_SWP ? 0x1111 : 3;
		wr.wr.atomic.swap = 0x2222;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	CHECK(ibv_post_send(send_qp, &wr, &bad) == 0);
	struct ibv_wc wc = poll_one(send_cq);
	CHECK(wc.wr_id == 9);
	return wc.status;
}

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	CHECK(list && list[0] && list[1]);
	struct ibv_context *a = ibv_open_device(list[0]), *b = ibv_open_device(list[1]);
	CHECK(a && b);
	struct ibv_port_attr pb;
	CHECK(ibv_query_port(b, 1, &pb) == 0);
	static uint64_t abuf[16], bbuf[16], other[16];
	struct ibv_pd *pda = ibv_alloc_pd(a), *pdb = ibv_alloc_pd(b), *pdb2 = ibv_alloc_pd(b);
	struct ibv_cq *cqa = ibv_create_cq(a, 8, NULL, NULL, 0), *cqb = ibv_create_cq(b, 8, NULL, NULL, 0);
	struct ibv_mr *mra = ibv_reg_mr(pda, abuf, sizeof(abuf), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *mrb = ibv_reg_mr(pdb, bbuf, sizeof(bbuf), REMOTE);
	struct ibv_mr *mro = ibv_reg_mr(pdb2, other, sizeof(other), REMOTE);
	CHECK(pda && pdb && pdb2 && cqa && cqb && mra && mrb && mro);
	struct ibv_xrcd *xrcd = new_xrcd(b);
	struct ibv_srq_init_attr_ex sa = {
		.attr = { .max_wr = 4, .max_sge = 1 },
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_PD |
			     IBV_SRQ_INIT_ATTR_CQ,
		.srq_type = IBV_SRQT_XRC, .xrcd = xrcd, .pd = pdb, .cq = cqb
	};
	struct ibv_srq *srq = ibv_create_srq_ex(b, &sa);
	CHECK(srq && ibv_get_srq_num(srq, &srqn) == 0);

	struct ibv_qp_init_attr_ex ra = { .qp_type = IBV_QPT_XRC_RECV,
					  .comp_mask = IBV_QP_INIT_ATTR_XRCD, .xrcd = xrcd };
	struct ibv_qp *recv = ibv_create_qp_ex(b, &ra);
	struct ibv_qp_init_attr_ex sx = { .qp_type = IBV_QPT_XRC_SEND, .send_cq = cqa,
					  .cap = { .max_send_wr = 4, .max_send_sge = 1 },
					  .comp_mask = IBV_QP_INIT_ATTR_PD, .pd = pda };
	send_qp = ibv_create_qp_ex(a, &sx);
	send_cq = cqa;
	CHECK(recv && send_qp);
	connect(send_qp, recv->qp_num, pb.lid, 0);
	connect(recv, send_qp->qp_num, 0, 1);

	/* WRITE lands in the SRQ's PD's MR. */
	memcpy(abuf, "xrc write", 10);
	CHECK(post(IBV_WR_RDMA_WRITE, abuf, 10, mra->lkey, (uintptr_t)&bbuf[2], mrb->rkey) ==
	      IBV_WC_SUCCESS);
	CHECK(strcmp((char *)&bbuf[2], "xrc write") == 0);

	/* READ brings it back. */
	memset(abuf, 0, sizeof(abuf));
	CHECK(post(IBV_WR_RDMA_READ, abuf, 10, mra->lkey, (uintptr_t)&bbuf[2], mrb->rkey) ==
	      IBV_WC_SUCCESS);
	CHECK(strcmp((char *)abuf, "xrc write") == 0);

	/* Atomics: the old value comes back, the new one is in place. */
	bbuf[8] = 0x1111;
	CHECK(post(IBV_WR_ATOMIC_CMP_AND_SWP, abuf, 8, mra->lkey, (uintptr_t)&bbuf[8], mrb->rkey) ==
	      IBV_WC_SUCCESS);
	CHECK(abuf[0] == 0x1111 && bbuf[8] == 0x2222);
	CHECK(post(IBV_WR_ATOMIC_FETCH_AND_ADD, abuf, 8, mra->lkey, (uintptr_t)&bbuf[8], mrb->rkey) ==
	      IBV_WC_SUCCESS);
	CHECK(abuf[0] == 0x2222 && bbuf[8] == 0x2225);

	/* WRITE with immediate: the immediate takes a receive of the SRQ. */
	struct ibv_sge rs = { (uintptr_t)&bbuf[12], 8, mrb->lkey };
	struct ibv_recv_wr rw = { .wr_id = 44, .sg_list = &rs, .num_sge = 1 }, *bad_r;
	CHECK(ibv_post_srq_recv(srq, &rw, &bad_r) == 0);
	CHECK(post(IBV_WR_RDMA_WRITE_WITH_IMM, abuf, 4, mra->lkey, (uintptr_t)&bbuf[4], mrb->rkey) ==
	      IBV_WC_SUCCESS);
	struct ibv_wc wc = poll_one(cqb);
	CHECK(wc.wr_id == 44 && wc.status == IBV_WC_SUCCESS &&
	      wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && wc.imm_data == htobe32(5) &&
	      wc.qp_num == recv->qp_num);

	/* The extended post API takes them on an XRC send QP too. */
	sx.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	sx.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_READ |
			    IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
	struct ibv_qp *sendx = ibv_create_qp_ex(a, &sx);
	CHECK(sendx);
	CHECK(ibv_destroy_qp(sendx) == 0);

	/* An MR of another PD than the SRQ's: a remote access error. */
	CHECK(post(IBV_WR_RDMA_WRITE, abuf, 8, mra->lkey, (uintptr_t)other, mro->rkey) ==
	      IBV_WC_REM_ACCESS_ERR);

	CHECK(ibv_destroy_qp(recv) == 0 && ibv_destroy_qp(send_qp) == 0);
	CHECK(ibv_destroy_srq(srq) == 0 && ibv_close_xrcd(xrcd) == 0);
	CHECK(ibv_dereg_mr(mra) == 0 && ibv_dereg_mr(mrb) == 0 && ibv_dereg_mr(mro) == 0);
	CHECK(ibv_destroy_cq(cqa) == 0 && ibv_destroy_cq(cqb) == 0);
	CHECK(ibv_dealloc_pd(pda) == 0 && ibv_dealloc_pd(pdb) == 0 && ibv_dealloc_pd(pdb2) == 0);
	DONE("obj_xrc_rdma");
}
