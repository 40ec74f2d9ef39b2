/* An RC QP's way from RESET to RTS towards a peer: the C tests' one copy
 * of the transitions. Each test picks the attributes it needs in a
 * `struct rc_path`; one it leaves out is 0. The attribute masks are the
 * same for every test. */
#ifndef C_RC_CONNECT_H
#define C_RC_CONNECT_H
#include <infiniband/verbs.h>
#include <stdint.h>
#include <string.h>

#include "../sim/check.h"

/* Where an RC QP sends, and how. */
struct rc_path {
	uint32_t qpn; /* the peer's QP */
	uint16_t lid; /* its port's LID (port 1) */
	uint8_t sl;
	uint8_t rd_atomic; /* max_dest_rd_atomic, and max_rd_atomic */
	uint8_t rnr_timer; /* min_rnr_timer */
	uint8_t timeout;
	uint8_t retry_cnt;
	uint8_t rnr_retry;
};

/* RESET (or a new QP) to INIT on port 1, `access` the remote access it
 * grants. */
static inline void rc_init(struct ibv_qp *qp, int access)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = access };
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					    IBV_QP_ACCESS_FLAGS) == 0);
}

/* INIT to RTR and RTS along `p`, at a 4096-byte path MTU. */
static inline void rc_rtr_rts(struct ibv_qp *qp, const struct rc_path *p)
{
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_4096;
	a.dest_qp_num = p->qpn;
	a.max_dest_rd_atomic = p->rd_atomic;
	a.min_rnr_timer = p->rnr_timer;
	a.ah_attr.dlid = p->lid;
	a.ah_attr.sl = p->sl;
	a.ah_attr.port_num = 1;
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					    IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = p->timeout;
	a.retry_cnt = p->retry_cnt;
	a.rnr_retry = p->rnr_retry;
	a.max_rd_atomic = p->rd_atomic;
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					    IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					    IBV_QP_MAX_QP_RD_ATOMIC) == 0);
}

#endif
