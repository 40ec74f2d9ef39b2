/* Two RC QPs on the sim's two devices, connected to each other, for the
 * object, whole-API, fault and fork tests (tests/c/objects, wholeapi,
 * faults, fork): set-up, (re)connection after an error, posting, polling. */
#ifndef C_RC_PAIR_H
#define C_RC_PAIR_H
#include <infiniband/verbs.h>
#include <poll.h>
#include <stdint.h>
#include <time.h>

#include "../sim/check.h"
#include "rc_connect.h"

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint16_t lid;
	uint64_t buf[512];
};

/* The device list, checked to hold the sim's two devices. */
static inline struct ibv_device **two_devices(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	CHECK(list && list[0] && list[1]);
	return list;
}

/* A side's context (and its port's LID), PD, CQ and MR over its buffer,
 * without the QP: the part every side has, whichever way its QP is made.
 * The caller checks pd, cq and mr. */
static inline void setup_side(struct side *s, struct ibv_device *dev, int mr_access)
{
	struct ibv_port_attr pa;
	s->ctx = ibv_open_device(dev);
	CHECK(s->ctx && ibv_query_port(s->ctx, 1, &pa) == 0);
	s->lid = pa.lid;
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, 64, NULL, NULL, 0);
	s->mr = ibv_reg_mr(s->pd, s->buf, sizeof(s->buf), mr_access);
}

/* A side with an RC QP of 16 work requests and 2 SGEs each way. */
static inline void setup(struct side *s, struct ibv_device *dev, int mr_access)
{
	setup_side(s, dev, mr_access);
	struct ibv_qp_init_attr qia = { .send_cq = s->cq, .recv_cq = s->cq, .qp_type = IBV_QPT_RC,
					.cap = { .max_send_wr = 16, .max_recv_wr = 16,
						 .max_send_sge = 2, .max_recv_sge = 2 } };
	s->qp = ibv_create_qp(s->pd, &qia);
	CHECK(s->pd && s->cq && s->mr && s->qp);
}

/* s's QP through RESET, INIT and RTR to RTS, towards peer's QP. */
static inline void connect_rc(struct side *s, struct side *peer)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };
	CHECK(ibv_modify_qp(s->qp, &a, IBV_QP_STATE) == 0);
	rc_init(s->qp, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	struct rc_path p = { .qpn = peer->qp->qp_num, .lid = peer->lid, .rd_atomic = 4,
			     .rnr_timer = 12, .timeout = 14, .retry_cnt = 7, .rnr_retry = 0 };
	rc_rtr_rts(s->qp, &p);
}

/* Side a on the first device, b on the second, their MRs with mr_access;
 * not connected yet. The list is left allocated, as these tests always
 * did (the shim's reports of the runs that keep it name it). */
static inline void setup_pair(struct side *a, struct side *b, int mr_access)
{
	struct ibv_device **list = two_devices();
	setup(a, list[0], mr_access);
	setup(b, list[1], mr_access);
}

/* Each QP to RTS towards the other's. */
static inline void connect_pair(struct side *a, struct side *b)
{
	connect_rc(a, b);
	connect_rc(b, a);
}

/* After an error completion: both QPs back to RTS, CQs drained. */
static inline void reconnect(struct side *a, struct side *b)
{
	struct ibv_wc wc;
	connect_pair(a, b);
	while (ibv_poll_cq(a->cq, 1, &wc) > 0)
		;
	while (ibv_poll_cq(b->cq, 1, &wc) > 0)
		;
}

/* One completion, waiting up to 5 s (the fabric may be another process). */
static inline struct ibv_wc poll_one(struct ibv_cq *cq)
{
	struct ibv_wc wc;
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int n = ibv_poll_cq(cq, 1, &wc);
		CHECK(n >= 0);
		if (n == 1)
			return wc;
		clock_gettime(CLOCK_MONOTONIC, &t);
		CHECK(t.tv_sec - t0.tv_sec < 5);
	}
}

/* Posts one signaled RDMA work request (WRITE / READ / atomic) or send. */
static inline int post_rdma(struct side *s, enum ibv_wr_opcode op, uint64_t id, void *addr, uint32_t len,
		     uint32_t lkey, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED }, *bad = NULL;
	if (op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = 1;
	} else if (op == IBV_WR_SEND_WITH_INV) {
		wr.invalidate_rkey = rkey;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	return ibv_post_send(s->qp, &wr, &bad);
}

/* The status of one RDMA work request from a to b. */
static inline enum ibv_wc_status rdma(struct side *a, enum ibv_wr_opcode op, void *addr, uint32_t len,
			       uint64_t raddr, uint32_t rkey)
{
	CHECK(post_rdma(a, op, 7, addr, len, a->mr->lkey, raddr, rkey) == 0);
	struct ibv_wc wc = poll_one(a->cq);
	CHECK(wc.wr_id == 7);
	return wc.status;
}

static inline void post_recv(struct side *s, uint64_t id, void *addr, uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = s->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad = NULL;
	CHECK(ibv_post_recv(s->qp, &wr, &bad) == 0);
}

#endif
