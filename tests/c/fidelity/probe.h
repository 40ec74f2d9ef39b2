/* The fidelity probes' shared part: open the device the run names, make
 * two RC QPs on it and connect them to each other (single-process
 * loopback, as on real Soft-RoCE), and print observations as
 * `key: value` lines with nothing machine-specific in them.
 *
 * FIDELITY_DEVICE names the device (default rxe0), FIDELITY_GID_INDEX the
 * GID the QPs address each other by (default 1: on real rxe the
 * IPv4-mapped GID of the Ethernet device). A probe exits 0 when it ran to
 * the end; 2 when it could not run (the reason on stderr). */
#ifndef FIDELITY_PROBE_H
#define FIDELITY_PROBE_H
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NEED(cond)                                                              \
	do {                                                                    \
		if (!(cond)) {                                                  \
			fprintf(stderr, "%s:%d: probe cannot run: %s (errno %d)\n", \
				__FILE__, __LINE__, #cond, errno);              \
			exit(2);                                                \
		}                                                               \
	} while (0)

struct probe {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	int gid_index;
	union ibv_gid gid;
	uint16_t lid; /* port 1's LID: 0 on RoCE, the address on InfiniBand */
};

static inline void probe_open(struct probe *p)
{
	const char *name = getenv("FIDELITY_DEVICE");
	const char *gi = getenv("FIDELITY_GID_INDEX");
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!name || !*name)
		name = "rxe0";
	p->gid_index = gi && *gi ? atoi(gi) : 1;
	NEED(list);
	p->ctx = NULL;
	for (int i = 0; i < n; i++)
		if (strcmp(ibv_get_device_name(list[i]), name) == 0)
			p->ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	NEED(p->ctx);
	NEED(ibv_query_gid(p->ctx, 1, p->gid_index, &p->gid) == 0);
	struct ibv_port_attr pa;
	NEED(ibv_query_port(p->ctx, 1, &pa) == 0);
	p->lid = pa.lid;
	p->pd = ibv_alloc_pd(p->ctx);
	NEED(p->pd);
}

static inline void probe_close(struct probe *p)
{
	NEED(ibv_dealloc_pd(p->pd) == 0);
	NEED(ibv_close_device(p->ctx) == 0);
}

static inline void say(const char *key, const char *value)
{
	printf("%s: %s\n", key, value);
	fflush(stdout);
}

static inline void say_int(const char *key, long long value)
{
	printf("%s: %lld\n", key, value);
	fflush(stdout);
}

static inline void say_hex(const char *key, unsigned long long value)
{
	printf("%s: 0x%llx\n", key, value);
	fflush(stdout);
}

static inline const char *wc_name(enum ibv_wc_status s)
{
	static const char *const names[] = {
		"SUCCESS", "LOC_LEN_ERR", "LOC_QP_OP_ERR", "LOC_EEC_OP_ERR",
		"LOC_PROT_ERR", "WR_FLUSH_ERR", "MW_BIND_ERR", "BAD_RESP_ERR",
		"LOC_ACCESS_ERR", "REM_INV_REQ_ERR", "REM_ACCESS_ERR", "REM_OP_ERR",
		"RETRY_EXC_ERR", "RNR_RETRY_EXC_ERR", "LOC_RDD_VIOL_ERR",
		"REM_INV_RD_REQ_ERR", "REM_ABORT_ERR", "INV_EECN_ERR",
		"INV_EEC_STATE_ERR", "FATAL_ERR", "RESP_TIMEOUT_ERR", "GENERAL_ERR",
		"TM_ERR", "TM_RNDV_INCOMPLETE",
	};
	if ((unsigned)s < sizeof(names) / sizeof(names[0]))
		return names[s];
	return "UNKNOWN";
}

static inline const char *errno_name(int e)
{
	switch (e) {
	case 0: return "0";
	case EINVAL: return "EINVAL";
	case ENOMEM: return "ENOMEM";
	case EFAULT: return "EFAULT";
	case EPERM: return "EPERM";
	case EACCES: return "EACCES";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case ENOSYS: return "ENOSYS";
	case EBUSY: return "EBUSY";
	case ENOENT: return "ENOENT";
	case ENOSPC: return "ENOSPC";
	case EAGAIN: return "EAGAIN";
	case ENODEV: return "ENODEV";
	case EPROTONOSUPPORT: return "EPROTONOSUPPORT";
	default: return "other";
	}
}

static inline const char *state_name(enum ibv_qp_state s)
{
	static const char *const names[] = { "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR" };
	if ((unsigned)s < sizeof(names) / sizeof(names[0]))
		return names[s];
	return "UNKNOWN";
}

static inline const char *qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr i;
	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &i))
		return "query failed";
	return state_name(a.qp_state);
}

static inline long long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static inline void sleep_ms(long ms)
{
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&t, &t) && errno == EINTR)
		;
}

/* One completion from `cq` within `ms` milliseconds: 1, or 0 if none came. */
static inline int poll_one(struct ibv_cq *cq, long ms, struct ibv_wc *wc)
{
	long long end = now_ms() + ms;
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);
		NEED(n >= 0);
		if (n == 1)
			return 1;
		if (now_ms() >= end)
			return 0;
		sleep_ms(1);
	}
}

/* The status of the next completion on `cq` within `ms`, or "none". */
static inline const char *next_status(struct ibv_cq *cq, long ms)
{
	struct ibv_wc wc;
	return poll_one(cq, ms, &wc) ? wc_name(wc.status) : "none";
}

/* A duration bucketed coarsely enough that a loaded machine stays in it. */
static inline const char *bucket_ms(long long ms)
{
	if (ms < 250)
		return "0-250";
	if (ms < 1250)
		return "250-1250";
	if (ms < 6000)
		return "1250-6000";
	return "6000+";
}

/* Coarser: only whether it waited at all, and not for ever. */
static inline const char *bucket_wide_ms(long long ms)
{
	if (ms < 250)
		return "0-250";
	if (ms < 6000)
		return "250-6000";
	return "6000+";
}

/* An RC QP with its own send and receive CQs. */
struct end {
	struct ibv_qp *qp;
	struct ibv_cq *scq, *rcq;
};

struct pair_opts {
	int send_wr, recv_wr, cqe; /* 0: 16, 16, 64 */
	int recv_cqe_b;            /* the responder's receive CQ (0: cqe) */
	int access_a, access_b;    /* the QPs' qp_access_flags */
	uint8_t rnr_timer;         /* min_rnr_timer of both */
	uint8_t rnr_retry, retry_cnt, timeout;
	int uc;                    /* UC QPs instead of RC */
};

static inline void end_make(struct probe *p, struct end *e, const struct pair_opts *o,
			    int recv_cqe)
{
	int cqe = o->cqe ? o->cqe : 64;
	e->scq = ibv_create_cq(p->ctx, cqe, NULL, NULL, 0);
	e->rcq = ibv_create_cq(p->ctx, recv_cqe ? recv_cqe : cqe, NULL, NULL, 0);
	NEED(e->scq && e->rcq);
	struct ibv_qp_init_attr ia;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = e->scq;
	ia.recv_cq = e->rcq;
	ia.qp_type = o->uc ? IBV_QPT_UC : IBV_QPT_RC;
	ia.cap.max_send_wr = o->send_wr ? o->send_wr : 16;
	ia.cap.max_recv_wr = o->recv_wr ? o->recv_wr : 16;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	e->qp = ibv_create_qp(p->pd, &ia);
	NEED(e->qp);
}

static inline void end_init(struct end *e, int access)
{
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = access;
	NEED(ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				       IBV_QP_ACCESS_FLAGS) == 0);
}

static inline void end_rtr(struct probe *p, struct end *e, uint32_t dest, const struct pair_opts *o)
{
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = o->rnr_timer;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = p->gid;
	a.ah_attr.grh.sgid_index = (uint8_t)p->gid_index;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	a.ah_attr.dlid = p->lid;
	int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	if (!o->uc) /* the responder's read and RNR attributes are RC's */
		mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	NEED(ibv_modify_qp(e->qp, &a, mask) == 0);
}

static inline void end_rts(struct end *e, const struct pair_opts *o)
{
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = o->timeout;
	a.retry_cnt = o->retry_cnt;
	a.rnr_retry = o->rnr_retry;
	a.sq_psn = 0;
	a.max_rd_atomic = 1;
	int mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (!o->uc) /* retries, timeouts and reads are RC's */
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_MAX_QP_RD_ATOMIC;
	NEED(ibv_modify_qp(e->qp, &a, mask) == 0);
}

/* Two connected RC (or UC) QPs, `a` the requester and `b` the responder,
 * both RTS. */
static inline void pair_make(struct probe *p, struct end *a, struct end *b,
			     const struct pair_opts *o)
{
	end_make(p, a, o, 0);
	end_make(p, b, o, o->recv_cqe_b);
	end_init(a, o->access_a);
	end_init(b, o->access_b);
	end_rtr(p, a, b->qp->qp_num, o);
	end_rtr(p, b, a->qp->qp_num, o);
	end_rts(a, o);
	end_rts(b, o);
}

static inline void end_destroy(struct end *e)
{
	NEED(ibv_destroy_qp(e->qp) == 0);
	NEED(ibv_destroy_cq(e->scq) == 0);
	NEED(ibv_destroy_cq(e->rcq) == 0);
}

static inline struct ibv_mr *mr_make(struct probe *p, size_t len, int access)
{
	void *buf = calloc(1, len);
	NEED(buf);
	struct ibv_mr *mr = ibv_reg_mr(p->pd, buf, len, access);
	NEED(mr);
	return mr;
}

static inline void mr_free(struct ibv_mr *mr)
{
	void *buf = mr->addr;
	NEED(ibv_dereg_mr(mr) == 0);
	free(buf);
}

static inline int post_recv(struct end *e, struct ibv_mr *mr, uint32_t len, uint64_t id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)mr->addr, .length = len, .lkey = mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad;
	return ibv_post_recv(e->qp, &wr, &bad);
}

/* Posts one signaled work request of `opcode` with one SGE of `len` bytes
 * of `mr`; RDMA to `raddr`/`rkey`. */
static inline int post_send(struct end *e, enum ibv_wr_opcode opcode, struct ibv_mr *mr,
			    uint32_t len, uint64_t raddr, uint32_t rkey, uint64_t id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)mr->addr, .length = len, .lkey = mr->lkey };
	struct ibv_send_wr wr, *bad;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = opcode;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(e->qp, &wr, &bad);
}

/* The async events waiting on the context within `ms`, counted by type
 * into `counts` (indexed by enum ibv_event_type, up to 32), acked. */
static inline void drain_events(struct probe *p, long ms, int counts[32])
{
	int fl = fcntl(p->ctx->async_fd, F_GETFL);
	NEED(fl >= 0 && fcntl(p->ctx->async_fd, F_SETFL, fl | O_NONBLOCK) == 0);
	long long end = now_ms() + ms;
	for (;;) {
		struct ibv_async_event ev;
		if (ibv_get_async_event(p->ctx, &ev) == 0) {
			if ((unsigned)ev.event_type < 32)
				counts[ev.event_type]++;
			ibv_ack_async_event(&ev);
			continue;
		}
		if (now_ms() >= end)
			break;
		sleep_ms(5);
	}
	NEED(fcntl(p->ctx->async_fd, F_SETFL, fl) == 0);
}

/* A count as a coarse word: none, one, several. */
static inline const char *how_many(int n)
{
	return n == 0 ? "none" : n == 1 ? "one" : "several";
}

#endif
