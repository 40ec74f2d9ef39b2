/* XRC in one process on the sim's two devices, for obj_xrc.c and
 * obj_xrc_rdma.c: the domain, the QPs' transitions, polling. */
#ifndef OBJ_XRC_H
#define OBJ_XRC_H
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <stdint.h>

#include "check.h"

/* A new XRC domain of ctx, not backed by a file (fd -1). */
static inline struct ibv_xrcd *new_xrcd(struct ibv_context *ctx)
{
	struct ibv_xrcd_init_attr xa = { .comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
					 .fd = -1, .oflags = O_CREAT };
	struct ibv_xrcd *xrcd = ibv_open_xrcd(ctx, &xa);
	CHECK(xrcd);
	return xrcd;
}

static inline void modify(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	CHECK(ibv_modify_qp(qp, a, mask) == 0);
}

/* xsrq_pingpong's transitions: INIT, RTR towards dest_qpn, RTS. recv: qp
 * is the XRC receive QP, which gets recv_access; rd_atomic: the READs and
 * atomics in flight each way (0: none). */
static inline void xrc_connect(struct ibv_qp *qp, uint32_t dest_qpn, uint16_t dlid, int recv,
			       unsigned int recv_access, uint8_t rd_atomic)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = recv ? recv_access : 0 };
	modify(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.dest_qp_num = dest_qpn;
	a.path_mtu = IBV_MTU_1024;
	a.min_rnr_timer = 12;
	a.max_dest_rd_atomic = rd_atomic;
	a.ah_attr.dlid = dlid;
	a.ah_attr.port_num = 1;
	modify(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			       IBV_QP_RQ_PSN |
			       (recv ? IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER : 0));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = rd_atomic;
	modify(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN |
			       (recv ? 0 : IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
						   IBV_QP_MAX_QP_RD_ATOMIC));
}

/* One completion, polling up to 5,000,000 times. */
static inline struct ibv_wc poll_one(struct ibv_cq *cq)
{
	struct ibv_wc wc;
	for (int i = 0; i < 5000000; i++)
		if (ibv_poll_cq(cq, 1, &wc) == 1)
			return wc;
	CHECK(!"a completion");
	return wc;
}

#endif
