/* XRC on the sim in one process: XRC SRQs and QPs with the kernel's errno
 * (missing domain or CQ, busy domain and CQ), ibv_get_srq_num, ibv_open_qp,
 * and an XRC send from one device's XRC send QP through the other's XRC
 * receive QP into the SRQ it names (a wrong SRQ number is the requester's
 * IBV_WC_REM_INV_REQ_ERR). ibv_xsrq_pingpong covers two processes. */
#include <infiniband/verbs.h>
#include <stdint.h>

#include "check.h"
#include "xrc.h"

/* The receive QP takes remote writes; no READs or atomics. */
static void connect(struct ibv_qp *qp, uint32_t dest_qpn, uint16_t dlid, int recv)
{
	xrc_connect(qp, dest_qpn, dlid, recv, IBV_ACCESS_REMOTE_WRITE, 0);
}

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	CHECK(list && list[0] && list[1]);
	struct ibv_context *a = ibv_open_device(list[0]), *b = ibv_open_device(list[1]);
	CHECK(a && b);
	struct ibv_device_attr da;
	CHECK(ibv_query_device(b, &da) == 0 && (da.device_cap_flags & IBV_DEVICE_XRC));
	struct ibv_port_attr pb;
	CHECK(ibv_query_port(b, 1, &pb) == 0);
	static char abuf[64], bbuf[64];
	struct ibv_pd *pda = ibv_alloc_pd(a), *pdb = ibv_alloc_pd(b);
	struct ibv_cq *cqa = ibv_create_cq(a, 8, NULL, NULL, 0), *cqb = ibv_create_cq(b, 8, NULL, NULL, 0);
	struct ibv_mr *mra = ibv_reg_mr(pda, abuf, sizeof(abuf), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *mrb = ibv_reg_mr(pdb, bbuf, sizeof(bbuf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(pda && pdb && cqa && cqb && mra && mrb);
	struct ibv_xrcd *xrcd = new_xrcd(b);

	/* An XRC SRQ needs its domain and CQ. */
	struct ibv_srq_init_attr_ex sa = {
		.attr = { .max_wr = 4, .max_sge = 1 },
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_PD,
		.srq_type = IBV_SRQT_XRC, .xrcd = xrcd, .pd = pdb, .cq = cqb
	};
	CHECK_ERRNO(ibv_create_srq_ex(b, &sa), EINVAL);
	sa.comp_mask |= IBV_SRQ_INIT_ATTR_CQ;
	struct ibv_srq *srq = ibv_create_srq_ex(b, &sa);
	CHECK(srq);
	uint32_t srqn = 0;
	CHECK(ibv_get_srq_num(srq, &srqn) == 0 && srqn != 0);
	CHECK(ibv_close_xrcd(xrcd) == EBUSY && ibv_destroy_cq(cqb) == EBUSY);

	/* XRC QPs: the receive side names the domain, the send side a PD. */
	struct ibv_qp_init_attr_ex ra = { .qp_type = IBV_QPT_XRC_RECV,
					  .comp_mask = IBV_QP_INIT_ATTR_PD, .pd = pdb };
	CHECK_ERRNO(ibv_create_qp_ex(b, &ra), EINVAL);
	ra.comp_mask = IBV_QP_INIT_ATTR_XRCD;
	ra.xrcd = xrcd;
	struct ibv_qp *recv = ibv_create_qp_ex(b, &ra);
	CHECK(recv && recv->qp_type == IBV_QPT_XRC_RECV);
	struct ibv_qp_init_attr_ex sx = { .qp_type = IBV_QPT_XRC_SEND, .send_cq = cqa,
					  .cap = { .max_send_wr = 4, .max_send_sge = 1 },
					  .comp_mask = IBV_QP_INIT_ATTR_PD, .pd = pda };
	struct ibv_qp *send = ibv_create_qp_ex(a, &sx);
	CHECK(send && send->qp_type == IBV_QPT_XRC_SEND);
	struct ibv_recv_wr *bad_r;

	/* ibv_open_qp: by number and domain; the type must be XRC_RECV. */
	struct ibv_qp_open_attr oa = { .comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
						    IBV_QP_OPEN_ATTR_TYPE | IBV_QP_OPEN_ATTR_CONTEXT,
				       .qp_num = recv->qp_num, .xrcd = xrcd, .qp_context = &oa,
				       .qp_type = IBV_QPT_RC };
	CHECK_ERRNO(ibv_open_qp(b, &oa), EINVAL);
	oa.qp_type = IBV_QPT_XRC_RECV;
	oa.qp_num = send->qp_num;
	CHECK_ERRNO(ibv_open_qp(b, &oa), EINVAL);
	oa.qp_num = recv->qp_num;
	struct ibv_qp *opened = ibv_open_qp(b, &oa);
	CHECK(opened && opened != recv && opened->qp_num == recv->qp_num &&
	      opened->qp_context == &oa);

	connect(send, recv->qp_num, pb.lid, 0);
	connect(recv, send->qp_num, 0, 1);
	struct ibv_sge bs = { (uintptr_t)bbuf, sizeof(bbuf), mrb->lkey };
	struct ibv_recv_wr bw = { .wr_id = 42, .sg_list = &bs, .num_sge = 1 };
	struct ibv_wc wc;
	CHECK(ibv_post_srq_recv(srq, &bw, &bad_r) == 0);

	/* The send lands in the SRQ it names, completing on the SRQ's CQ with
	 * the receive QP's number; the original handle may go first. */
	CHECK(ibv_destroy_qp(recv) == 0);
	strcpy(abuf, "over XRC");
	struct ibv_sge ss = { (uintptr_t)abuf, 9, mra->lkey };
	struct ibv_send_wr sw = { .wr_id = 7, .sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad_s;
	sw.qp_type.xrc.remote_srqn = srqn;
	CHECK(ibv_post_send(send, &sw, &bad_s) == 0);
	wc = poll_one(cqa);
	CHECK(wc.wr_id == 7 && wc.status == IBV_WC_SUCCESS);
	wc = poll_one(cqb);
	CHECK(wc.wr_id == 42 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV);
	CHECK(wc.byte_len == 9 && wc.qp_num == opened->qp_num && wc.src_qp == send->qp_num);
	CHECK(strcmp(bbuf, "over XRC") == 0);

	/* A wrong SRQ number: the requester's IBV_WC_REM_INV_REQ_ERR. */
	sw.qp_type.xrc.remote_srqn = srqn + 100;
	CHECK(ibv_post_send(send, &sw, &bad_s) == 0);
	wc = poll_one(cqa);
	CHECK(wc.wr_id == 7 && wc.status == IBV_WC_REM_INV_REQ_ERR);

	/* The extended post API: ibv_wr_send with ibv_wr_set_xrc_srqn. */
	struct ibv_qp *recv2 = ibv_create_qp_ex(b, &ra);
	sx.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	sx.send_ops_flags = IBV_QP_EX_WITH_SEND;
	struct ibv_qp *sendx = ibv_create_qp_ex(a, &sx);
	CHECK(recv2 && sendx && ibv_qp_to_qp_ex(sendx));
	connect(sendx, recv2->qp_num, pb.lid, 0);
	connect(recv2, sendx->qp_num, 0, 1);
	bw.wr_id = 43;
	CHECK(ibv_post_srq_recv(srq, &bw, &bad_r) == 0);
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(sendx);
	ibv_wr_start(x);
	x->wr_id = 8;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(x);
	ibv_wr_set_xrc_srqn(x, srqn);
	ibv_wr_set_sge(x, mra->lkey, (uintptr_t)abuf, 4);
	CHECK(ibv_wr_complete(x) == 0);
	wc = poll_one(cqa);
	CHECK(wc.wr_id == 8 && wc.status == IBV_WC_SUCCESS);
	wc = poll_one(cqb);
	CHECK(wc.wr_id == 43 && wc.status == IBV_WC_SUCCESS && wc.qp_num == recv2->qp_num);
	CHECK(ibv_destroy_qp(recv2) == 0 && ibv_destroy_qp(sendx) == 0);

	CHECK(ibv_destroy_qp(opened) == 0 && ibv_destroy_qp(send) == 0);
	CHECK(ibv_destroy_srq(srq) == 0);
	CHECK(ibv_close_xrcd(xrcd) == 0);
	CHECK(ibv_dereg_mr(mra) == 0 && ibv_dereg_mr(mrb) == 0);
	CHECK(ibv_destroy_cq(cqa) == 0 && ibv_destroy_cq(cqb) == 0);
	CHECK(ibv_dealloc_pd(pda) == 0 && ibv_dealloc_pd(pdb) == 0);
	DONE("obj_xrc");
}
