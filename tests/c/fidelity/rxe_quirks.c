/* Behaviours where Soft-RoCE (rdma-core 44's provider, Linux 6.1's
 * driver) differs from what the spec and other devices do, each where a
 * conformance test passes elsewhere and fails on rxe: the extended
 * builders' inline list and SGE list lengths, an atomic write the
 * provider accepts and the kernel cannot execute, `ibv_rereg_mr`, a
 * SEND with invalidate on UC, and RDMA READs with no read credits on
 * either end. */
#include "probe.h"

struct conn {
	int qp_type;
	uint64_t send_ops;   /* 0: a plain QP */
	uint8_t rd_atomic;   /* the requester's max_rd_atomic */
	uint8_t dest_rd_atomic; /* the responder's max_dest_rd_atomic */
};

static struct ibv_qp *make(struct probe *p, struct end *e, const struct conn *c, int ex)
{
	e->scq = ibv_create_cq(p->ctx, 64, NULL, NULL, 0);
	e->rcq = ibv_create_cq(p->ctx, 64, NULL, NULL, 0);
	NEED(e->scq && e->rcq);
	struct ibv_qp_init_attr_ex ia;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = e->scq;
	ia.recv_cq = e->rcq;
	ia.qp_type = c->qp_type;
	ia.cap.max_send_wr = 16;
	ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = 4;
	ia.cap.max_recv_sge = 1;
	ia.cap.max_inline_data = 64;
	ia.pd = p->pd;
	ia.comp_mask = IBV_QP_INIT_ATTR_PD;
	if (ex) {
		ia.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		ia.send_ops_flags = c->send_ops;
	}
	e->qp = ibv_create_qp_ex(p->ctx, &ia);
	return e->qp;
}

static void connect_end(struct probe *p, struct end *e, uint32_t dest, const struct conn *c,
			int requester)
{
	int rc = c->qp_type == IBV_QPT_RC;
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | (rc ? IBV_ACCESS_REMOTE_READ |
					IBV_ACCESS_REMOTE_ATOMIC : 0);
	NEED(ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				       IBV_QP_ACCESS_FLAGS) == 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.max_dest_rd_atomic = requester ? 1 : c->dest_rd_atomic;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = p->gid;
	a.ah_attr.grh.sgid_index = (uint8_t)p->gid_index;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	a.ah_attr.dlid = p->lid;
	NEED(ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				       IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				       (rc ? IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER : 0)) == 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = requester ? c->rd_atomic : 1;
	NEED(ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN |
				       (rc ? IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					IBV_QP_MAX_QP_RD_ATOMIC : 0)) == 0);
}

struct world {
	struct end a, b;
	struct ibv_mr *src, *dst, *rbuf;
	struct ibv_qp_ex *x;
};

/* a (extended when c->send_ops) and b connected; "create" said. */
static int open_world(struct probe *p, struct world *w, const char *name, const struct conn *c)
{
	char key[96];
	snprintf(key, sizeof(key), "%s.create", name);
	if (!make(p, &w->a, c, c->send_ops != 0)) {
		say(key, errno_name(errno));
		NEED(ibv_destroy_cq(w->a.scq) == 0 && ibv_destroy_cq(w->a.rcq) == 0);
		return 0;
	}
	say(key, "0");
	NEED(make(p, &w->b, c, 0));
	connect_end(p, &w->a, w->b.qp->qp_num, c, 1);
	connect_end(p, &w->b, w->a.qp->qp_num, c, 0);
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		  IBV_ACCESS_REMOTE_ATOMIC;
	w->src = mr_make(p, 4096, acc);
	w->dst = mr_make(p, 4096, acc);
	w->rbuf = mr_make(p, 4096, IBV_ACCESS_LOCAL_WRITE);
	memset(w->src->addr, 0x5a, 4096);
	NEED(post_recv(&w->b, w->rbuf, 4096, 9) == 0);
	w->x = c->send_ops ? ibv_qp_to_qp_ex(w->a.qp) : NULL;
	return 1;
}

/* The send's completion, the receive's byte count and the QPs' states. */
static void close_world(struct world *w, const char *name, int rc)
{
	char key[96];
	snprintf(key, sizeof(key), "%s.post", name);
	say(key, errno_name(rc));
	snprintf(key, sizeof(key), "%s.send", name);
	say(key, rc ? "not posted" : next_status(w->a.scq, 2000));
	struct ibv_wc wc;
	snprintf(key, sizeof(key), "%s.recv_bytes", name);
	if (poll_one(w->b.rcq, 500, &wc) && wc.status == IBV_WC_SUCCESS)
		say_int(key, wc.byte_len);
	else
		say(key, "none");
	snprintf(key, sizeof(key), "%s.requester_state", name);
	say(key, qp_state(w->a.qp));
	/* A request still waiting for credits is flushed by the reset. */
	struct ibv_qp_attr r = { .qp_state = IBV_QPS_RESET };
	NEED(ibv_modify_qp(w->a.qp, &r, IBV_QP_STATE) == 0);
	end_destroy(&w->a);
	end_destroy(&w->b);
	mr_free(w->src);
	mr_free(w->dst);
	mr_free(w->rbuf);
}

static void inline_list(struct probe *p)
{
	struct conn c = { IBV_QPT_RC, IBV_QP_EX_WITH_SEND, 1, 1 };
	struct world w;
	if (!open_world(p, &w, "inline_list", &c))
		return;
	char *s = w.src->addr;
	struct ibv_data_buf bufs[2] = { { s, 8 }, { s + 8, 8 } };
	ibv_wr_start(w.x);
	w.x->wr_id = 1;
	w.x->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	ibv_wr_send(w.x);
	ibv_wr_set_inline_data_list(w.x, 2, bufs);
	close_world(&w, "inline_list", ibv_wr_complete(w.x));
}

static void sge_list(struct probe *p)
{
	struct conn c = { IBV_QPT_RC, IBV_QP_EX_WITH_SEND, 1, 1 };
	struct world w;
	if (!open_world(p, &w, "sge_list_8_100", &c))
		return;
	uintptr_t s = (uintptr_t)w.src->addr;
	struct ibv_sge sg[2] = { { s, 8, w.src->lkey }, { s + 64, 100, w.src->lkey } };
	ibv_wr_start(w.x);
	w.x->wr_id = 1;
	w.x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(w.x);
	ibv_wr_set_sge_list(w.x, 2, sg);
	close_world(&w, "sge_list_8_100", ibv_wr_complete(w.x));
}

static void atomic_write(struct probe *p)
{
	struct conn c = { IBV_QPT_RC, IBV_QP_EX_WITH_ATOMIC_WRITE, 1, 1 };
	struct world w;
	if (!open_world(p, &w, "atomic_write", &c))
		return;
	ibv_wr_start(w.x);
	w.x->wr_id = 1;
	w.x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_write(w.x, w.dst->rkey, (uintptr_t)w.dst->addr, w.src->addr);
	close_world(&w, "atomic_write", ibv_wr_complete(w.x));
}

static void uc_send_inv(struct probe *p)
{
	struct conn c = { IBV_QPT_UC, IBV_QP_EX_WITH_SEND_WITH_INV, 1, 1 };
	struct world w;
	if (!open_world(p, &w, "uc_send_inv", &c))
		return;
	ibv_wr_start(w.x);
	w.x->wr_id = 1;
	w.x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send_inv(w.x, w.dst->rkey);
	ibv_wr_set_sge(w.x, w.src->lkey, (uintptr_t)w.src->addr, 16);
	close_world(&w, "uc_send_inv", ibv_wr_complete(w.x));
}

static void read_credits(struct probe *p, const char *name, uint8_t rd, uint8_t dest_rd)
{
	struct conn c = { IBV_QPT_RC, 0, rd, dest_rd };
	struct world w;
	if (!open_world(p, &w, name, &c))
		return;
	close_world(&w, name, post_send(&w.a, IBV_WR_RDMA_READ, w.src, 16,
					(uintptr_t)w.dst->addr, w.dst->rkey, 1));
}

static void rereg(struct probe *p)
{
	struct ibv_mr *mr = mr_make(p, 4096, IBV_ACCESS_LOCAL_WRITE);
	errno = 0;
	int rc = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	say_int("rereg_mr.result", rc);
	say("rereg_mr.errno", rc ? errno_name(errno) : "0");
	mr_free(mr);
}

int main(void)
{
	struct probe p;
	probe_open(&p);
	inline_list(&p);
	sge_list(&p);
	atomic_write(&p);
	uc_send_inv(&p);
	read_credits(&p, "read_max_rd_atomic_0", 0, 1);
	read_credits(&p, "read_max_dest_rd_atomic_0", 1, 0);
	rereg(&p);
	probe_close(&p);
	return 0;
}
