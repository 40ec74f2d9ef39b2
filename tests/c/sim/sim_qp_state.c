/* The QP state machine: legal transitions with their required attributes,
 * illegal transitions and masks (EINVAL), per QP type. */
#include <infiniband/verbs.h>
#include <stdint.h>

#include "check.h"

static struct ibv_qp *make(struct ibv_pd *pd, struct ibv_cq *cq, enum ibv_qp_type t)
{
	struct ibv_qp_init_attr a = { .send_cq = cq, .recv_cq = cq, .qp_type = t,
				      .cap = { .max_send_wr = 4, .max_recv_wr = 4,
					       .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *qp = ibv_create_qp(pd, &a);
	CHECK(qp);
	return qp;
}

static int to(struct ibv_qp *qp, enum ibv_qp_state s, int mask, struct ibv_qp_attr *a)
{
	a->qp_state = s;
	return ibv_modify_qp(qp, a, IBV_QP_STATE | mask);
}

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = ibv_open_device(list[0]);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_port_attr pa;
	CHECK(ctx && pd && cq && ibv_query_port(ctx, 1, &pa) == 0);

	const int init_mask = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
	const int rtr_mask = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	const int rts_mask = IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
			     IBV_QP_MAX_QP_RD_ATOMIC;

	struct ibv_qp *qp = make(pd, cq, IBV_QPT_RC);
	struct ibv_qp_attr a = { .port_num = 1, .pkey_index = 0,
				 .qp_access_flags = IBV_ACCESS_REMOTE_READ,
				 .path_mtu = IBV_MTU_1024, .dest_qp_num = qp->qp_num,
				 .rq_psn = 0, .max_dest_rd_atomic = 1, .min_rnr_timer = 12,
				 .ah_attr = { .dlid = pa.lid, .port_num = 1 },
				 .timeout = 14, .retry_cnt = 7, .rnr_retry = 7, .sq_psn = 0,
				 .max_rd_atomic = 1 };

	/* Illegal from RESET. */
	CHECK(to(qp, IBV_QPS_RTR, rtr_mask, &a) == EINVAL);
	CHECK(errno == EINVAL);
	CHECK(to(qp, IBV_QPS_RTS, rts_mask, &a) == EINVAL);
	CHECK(to(qp, IBV_QPS_ERR, 0, &a) == EINVAL);
	CHECK(qp->state == IBV_QPS_RESET);
	/* RESET->INIT: a required attribute missing, then one not allowed. */
	CHECK(to(qp, IBV_QPS_INIT, IBV_QP_PKEY_INDEX | IBV_QP_PORT, &a) == EINVAL);
	CHECK(to(qp, IBV_QPS_INIT, init_mask | IBV_QP_QKEY, &a) == EINVAL);
	a.port_num = 2; /* no such port */
	CHECK(to(qp, IBV_QPS_INIT, init_mask, &a) == EINVAL);
	a.port_num = 1;
	a.pkey_index = 500; /* beyond the P_Key table */
	CHECK(to(qp, IBV_QPS_INIT, init_mask, &a) == EINVAL);
	a.pkey_index = 0;
	CHECK(to(qp, IBV_QPS_INIT, init_mask, &a) == 0);
	CHECK(qp->state == IBV_QPS_INIT);
	/* INIT->INIT with optional attributes only. */
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_ACCESS_FLAGS) == 0);
	/* INIT->RTS is not a transition. */
	CHECK(to(qp, IBV_QPS_RTS, rts_mask, &a) == EINVAL);
	/* INIT->RTR: bad path MTU, then bad address port, then good. */
	a.path_mtu = 9;
	CHECK(to(qp, IBV_QPS_RTR, rtr_mask, &a) == EINVAL);
	a.path_mtu = IBV_MTU_1024;
	a.ah_attr.port_num = 0;
	CHECK(to(qp, IBV_QPS_RTR, rtr_mask, &a) == EINVAL);
	a.ah_attr.port_num = 1;
	CHECK(to(qp, IBV_QPS_RTR, rtr_mask & ~IBV_QP_MIN_RNR_TIMER, &a) == EINVAL);
	CHECK(to(qp, IBV_QPS_RTR, rtr_mask, &a) == 0);
	CHECK(qp->state == IBV_QPS_RTR);
	/* RTR->RTR does not exist; RTR->RTS needs its attributes. */
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_MIN_RNR_TIMER) == EINVAL);
	a.max_rd_atomic = 200;
	CHECK(to(qp, IBV_QPS_RTS, rts_mask, &a) == EINVAL);
	a.max_rd_atomic = 1;
	CHECK(to(qp, IBV_QPS_RTS, rts_mask & ~IBV_QP_SQ_PSN, &a) == EINVAL);
	CHECK(to(qp, IBV_QPS_RTS, rts_mask, &a) == 0);
	CHECK(qp->state == IBV_QPS_RTS);
	/* RTS->RTS (optional only), the current-state check, SQD and back. */
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_MIN_RNR_TIMER) == 0);
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_PATH_MTU) == EINVAL);
	a.cur_qp_state = IBV_QPS_RTS;
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_CUR_STATE) == 0);
	a.cur_qp_state = IBV_QPS_INIT;
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_CUR_STATE) == EINVAL);
	CHECK(to(qp, IBV_QPS_SQD, 0, &a) == 0);
	CHECK(to(qp, IBV_QPS_RTS, 0, &a) == 0);
	/* Anything -> ERR -> RESET; ERR -> RTS is illegal. */
	CHECK(to(qp, IBV_QPS_ERR, 0, &a) == 0);
	CHECK(to(qp, IBV_QPS_RTS, 0, &a) == EINVAL);
	CHECK(to(qp, IBV_QPS_RESET, 0, &a) == 0);
	struct ibv_qp_attr q;
	struct ibv_qp_init_attr qi;
	CHECK(ibv_query_qp(qp, &q, IBV_QP_STATE, &qi) == 0 && q.qp_state == IBV_QPS_RESET);
	a.qp_state = 42;
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == EINVAL);
	CHECK(ibv_modify_qp(qp, &a, 1 << 30) == EOPNOTSUPP);

	/* UD has its own rules: QKEY at INIT, nothing at RTR, SQ_PSN at RTS. */
	struct ibv_qp *ud = make(pd, cq, IBV_QPT_UD);
	struct ibv_qp_attr u = { .port_num = 1, .pkey_index = 0, .qkey = 0x11111111, .sq_psn = 1 };
	CHECK(to(ud, IBV_QPS_INIT, init_mask, &u) == EINVAL);
	CHECK(to(ud, IBV_QPS_INIT, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY, &u) == 0);
	CHECK(to(ud, IBV_QPS_RTR, IBV_QP_AV, &u) == EINVAL);
	CHECK(to(ud, IBV_QPS_RTR, 0, &u) == 0);
	CHECK(to(ud, IBV_QPS_RTS, 0, &u) == EINVAL);
	CHECK(to(ud, IBV_QPS_RTS, IBV_QP_SQ_PSN, &u) == 0);
	CHECK(ud->state == IBV_QPS_RTS);

	/* UC: RC's INIT attributes, no atomics / RNR attributes at RTR. */
	struct ibv_qp *uc = make(pd, cq, IBV_QPT_UC);
	CHECK(to(uc, IBV_QPS_INIT, init_mask, &a) == 0);
	CHECK(to(uc, IBV_QPS_RTR, rtr_mask, &a) == EINVAL);
	CHECK(to(uc, IBV_QPS_RTR, IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
		 &a) == 0);
	CHECK(to(uc, IBV_QPS_RTS, IBV_QP_SQ_PSN, &a) == 0);

	CHECK(ibv_destroy_qp(uc) == 0);
	CHECK(ibv_destroy_qp(ud) == 0);
	CHECK(ibv_destroy_qp(qp) == 0);
	CHECK(ibv_destroy_cq(cq) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	ibv_free_device_list(list);
	DONE("sim_qp_state");
}
