/* Creates and destroys one of everything (run under valgrind: no leak, no
 * invalid access), including a completion event, an async event and a
 * loopback send. */
#include <infiniband/verbs.h>
#include <stdint.h>

#include "check.h"

int main(void)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	CHECK(list && n >= 1);
	struct ibv_context *ctx = ibv_open_device(list[0]);
	CHECK(ctx);
	struct ibv_device_attr_ex dax;
	struct ibv_port_attr pa;
	union ibv_gid gid;
	CHECK(ibv_query_device_ex(ctx, NULL, &dax) == 0);
	CHECK(ibv_query_port(ctx, 1, &pa) == 0);
	CHECK(ibv_query_gid(ctx, 1, 0, &gid) == 0);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	static char buf[4096];
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 2, NULL, ch, 0); /* small: overflows below */
	struct ibv_srq_init_attr sia = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sia);
	struct ibv_qp_init_attr qia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
					.cap = { .max_send_wr = 8, .max_recv_wr = 8,
						 .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *qp = ibv_create_qp(pd, &qia);
	struct ibv_ah_attr aha = { .dlid = pa.lid, .port_num = 1 };
	struct ibv_ah *ah = ibv_create_ah(pd, &aha);
	CHECK(pd && mr && ch && cq && srq && qp && ah);

	/* Connect the QP to itself and send: completion + channel event. */
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					    IBV_QP_ACCESS_FLAGS) == 0);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = qp->qp_num;
	a.ah_attr.dlid = pa.lid;
	a.ah_attr.port_num = 1;
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					    IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
					    IBV_QP_MIN_RNR_TIMER) == 0);
	a.qp_state = IBV_QPS_RTS;
	a.rnr_retry = 7;
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					    IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					    IBV_QP_MAX_QP_RD_ATOMIC) == 0);
	CHECK(ibv_req_notify_cq(cq, 0) == 0);
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 16, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;
	/* Sent before the receive is posted: waits (rnr_retry 7), lands on post_recv. */
	CHECK(ibv_post_send(qp, &wr, &bad) == 0);
	struct ibv_recv_wr rwr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1 }, *rbad;
	CHECK(ibv_post_recv(qp, &rwr, &rbad) == 0);
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	CHECK(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == 0 && ev_cq == cq);
	ibv_ack_cq_events(cq, 1);
	struct ibv_wc wc[4];
	CHECK(ibv_poll_cq(cq, 4, wc) == 2);
	/* Overflow the 3-entry CQ: an async CQ error. */
	for (int i = 0; i < 2; i++) {
		CHECK(ibv_post_recv(qp, &rwr, &rbad) == 0);
		CHECK(ibv_post_send(qp, &wr, &bad) == 0);
	}
	struct ibv_async_event ev;
	CHECK(ibv_get_async_event(ctx, &ev) == 0);
	CHECK(ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq == cq);
	ibv_ack_async_event(&ev);
	while (ibv_poll_cq(cq, 4, wc) > 0)
		;

	CHECK(ibv_destroy_ah(ah) == 0);
	CHECK(ibv_destroy_qp(qp) == 0);
	CHECK(ibv_destroy_srq(srq) == 0);
	CHECK(ibv_destroy_cq(cq) == 0);
	CHECK(ibv_destroy_comp_channel(ch) == 0);
	CHECK(ibv_dereg_mr(mr) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	ibv_free_device_list(list);
	DONE("sim_everything");
}
