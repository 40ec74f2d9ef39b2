/* Work in flight, one scenario per run (argv[1]), on one device
 * (FIDELITY_DEVICE, default rxe0: the sim's or real Soft-RoCE) with two RC
 * QPs connected to each other. Under IBV_SHIM_CHECK=inflight each
 * scenario but `clean` makes the shim report one kind of finding; each is
 * a bug the provider itself never reports:
 *
 *   clean          a SEND and WRITEs, every buffer left alone until its
 *                  completion; receives at teardown (none to report)
 *   send_modified  a SEND's buffer written after the post, before its
 *                  completion is polled; an unsignalled WRITE's buffer
 *                  written, completed by a later signalled WRITE
 *   recv_reused    a receive buffer posted twice; a READ into a buffer an
 *                  outstanding receive holds
 *   dereg          ibv_dereg_mr of the MR an outstanding receive uses
 *   destroy_qp     ibv_destroy_qp with a WRITE whose completion was never
 *                  polled, then ibv_destroy_cq of its CQ (teardown_qp, _cq);
 *                  before them, that ibv_destroy_cq refused (EBUSY: no
 *                  finding)
 *   reset          a move to RESET with such a WRITE outstanding
 *   overrun        more receives posted than their CQ has entries
 *   srq            an SRQ's receive buffer posted twice
 *   recv_cross     a buffer of a receive posted on one QP given, before it
 *                  completed, to a receive of the other QP, to a READ of
 *                  the other QP, and to an SRQ's receive
 *   ud             on two UD QPs: a SEND's buffer written before its
 *                  completion, a receive buffer posted twice, the sender
 *                  destroyed with a signalled SEND unpolled and its CQ
 *                  after it
 *   ex             on a QP made with ibv_create_qp_ex, posting through
 *                  ibv_wr_*: a SEND's buffer written before its
 *                  completion, a READ into a posted receive's buffer, the
 *                  MR of an outstanding WRITE deregistered, the QP and its
 *                  CQ destroyed with a signalled SEND unpolled
 *   rereg          ibv_rereg_mr of the MR an outstanding receive uses: a
 *                  finding where the provider re-registers it, none where
 *                  the call fails (rxe has no rereg: EOPNOTSUPP)
 *   uc             on two UC QPs: a WRITE's buffer written before its
 *                  completion, a receive buffer posted twice, the
 *                  requester destroyed with a signalled WRITE unpolled and
 *                  its CQ after it
 *   dealloc_mw     ibv_dealloc_mw of a type 2 window whose posted bind has
 *                  not completed, of one whose local invalidation has not,
 *                  of a type 1 window whose ibv_bind_mw has not, and of
 *                  one bound through ibv_wr_bind_mw, not completed; a
 *                  window deallocated after its bind completed is no
 *                  finding
 *
 * and two more with nothing to report, which a checker that judges too
 * simply would report:
 *   unsignalled_tail  ibv_destroy_qp with unsignalled WRITEs outstanding
 *                  and no signalled one behind them: there is no
 *                  completion the program could have polled
 *   send_from_recv a SEND from the buffer of a posted receive, the peer's
 *                  answer landing there before the SEND's completion is
 *                  polled (perftest's key exchange): the device changed
 *                  the bytes, not the program; run both ways round (the
 *                  receive's completion polled after, then before)
 *   dereg_after_err ibv_dereg_mr of a posted receive's MR after its QP
 *                  went to ERR (rping after rdma_disconnect): flushed, the
 *                  device writes it no more
 *
 * Exits 0 having printed "<scenario> done"; 2 when it could not run. */
#include "../fidelity/probe.h"

#define SITE __attribute__((noipa))
/* The call a site makes, not as a tail call (the site is its return address). */
#define NOTAIL(call)                                   \
	do {                                           \
		int rc_ = (call);                      \
		__asm__ volatile("" : "+r"(rc_) :: "memory"); \
		return rc_;                            \
	} while (0)

static struct probe p;
static struct end a, b;
static struct ibv_mr *ma, *mb;

static void pair(int cqe, int uc)
{
	/* UC has no reads: remote write access only. */
	int qacc = IBV_ACCESS_REMOTE_WRITE | (uc ? 0 : IBV_ACCESS_REMOTE_READ);
	struct pair_opts o = { .cqe = cqe, .access_a = qacc, .access_b = qacc, .uc = uc,
			       .timeout = 14, .retry_cnt = 7, .rnr_retry = 7, .rnr_timer = 1 };
	probe_open(&p);
	pair_make(&p, &a, &b, &o);
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	ma = mr_make(&p, 4096, acc);
	mb = mr_make(&p, 4096, acc);
}

static void ok(struct ibv_cq *cq)
{
	struct ibv_wc wc;
	NEED(poll_one(cq, 5000, &wc) == 1);
	if (wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, "completion %s\n", wc_name(wc.status));
		exit(2);
	}
}

static int post_sge(struct end *e, enum ibv_wr_opcode op, void *addr, uint32_t len, uint32_t lkey,
		    uint64_t raddr, uint32_t rkey, uint64_t id, int flags)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr, *bad;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = flags;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(e->qp, &wr, &bad);
}

static int recv_at(struct end *e, void *addr, uint32_t len, uint32_t lkey, uint64_t id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad;
	return ibv_post_recv(e->qp, &wr, &bad);
}

static void teardown(void)
{
	end_destroy(&a);
	end_destroy(&b);
	mr_free(ma);
	mr_free(mb);
	probe_close(&p);
}

SITE static int send_then_touch(char *buf)
{
	int rc = post_sge(&a, IBV_WR_SEND, buf, 64, ma->lkey, 0, 0, 0x51, IBV_SEND_SIGNALED);
	buf[10] ^= 0x5a; /* too early: the SEND may not have read it yet */
	return rc;
}

SITE static int unsignalled_write(char *buf)
{
	return post_sge(&a, IBV_WR_RDMA_WRITE, buf, 128, ma->lkey, (uintptr_t)mb->addr + 1024,
			mb->rkey, 0x61, 0);
}

static void clean(void)
{
	char *buf = ma->addr;
	NEED(recv_at(&b, mb->addr, 256, mb->lkey, 0x10) == 0);
	memset(buf, 'c', 256);
	NEED(post_sge(&a, IBV_WR_SEND, buf, 64, ma->lkey, 0, 0, 0x11, IBV_SEND_SIGNALED) == 0);
	ok(a.scq);
	ok(b.rcq);
	buf[0] = 'd'; /* after the completion: fine */
	NEED(post_sge(&a, IBV_WR_RDMA_WRITE, buf, 128, ma->lkey, (uintptr_t)mb->addr + 512,
		      mb->rkey, 0x12, 0) == 0);
	NEED(post_sge(&a, IBV_WR_RDMA_WRITE, buf + 128, 128, ma->lkey, (uintptr_t)mb->addr + 640,
		      mb->rkey, 0x13, IBV_SEND_SIGNALED) == 0);
	ok(a.scq);
	memset(buf, 'e', 256);
	/* Receives still posted at teardown are no finding. */
	NEED(recv_at(&b, mb->addr, 256, mb->lkey, 0x14) == 0);
	NEED(recv_at(&a, (char *)ma->addr + 1024, 256, ma->lkey, 0x15) == 0);
}

static void send_modified(void)
{
	char *buf = ma->addr;
	memset(buf, 's', 512);
	NEED(recv_at(&b, mb->addr, 256, mb->lkey, 0x50) == 0);
	NEED(send_then_touch(buf) == 0);
	ok(a.scq);
	ok(b.rcq);
	NEED(unsignalled_write(buf + 256) == 0);
	buf[300] ^= 1;
	NEED(post_sge(&a, IBV_WR_RDMA_WRITE, buf + 128, 64, ma->lkey, (uintptr_t)mb->addr + 2048,
		      mb->rkey, 0x62, IBV_SEND_SIGNALED) == 0);
	ok(a.scq);
}

SITE static int repost_then_touch(char *buf)
{
	int rc = post_sge(&a, IBV_WR_RDMA_WRITE, buf, 256, ma->lkey, (uintptr_t)mb->addr + 3072,
			  mb->rkey, 0x81, IBV_SEND_SIGNALED);
	buf[200] ^= 1; /* too early, three bytes */
	buf[201] ^= 1;
	buf[202] ^= 1;
	return rc;
}

/* perftest's pattern: one wr_id and one buffer posted again and again,
 * rewritten between a completion and the next post (fine); then one
 * touched in flight. */
static void repost(void)
{
	char *buf = (char *)ma->addr + 1024;
	for (int i = 0; i < 6; i++) {
		memset(buf, 'p' + i, 256);
		NEED(post_sge(&a, IBV_WR_RDMA_WRITE, buf, 256, ma->lkey,
			      (uintptr_t)mb->addr + 3072, mb->rkey, 0x81, IBV_SEND_SIGNALED) == 0);
		ok(a.scq);
	}
	memset(buf, 'z', 256);
	NEED(repost_then_touch(buf) == 0);
	ok(a.scq);
}

SITE static int recv_again(void *addr)
{
	return recv_at(&b, addr, 128, mb->lkey, 0x71);
}

SITE static int read_into(void *addr)
{
	return post_sge(&b, IBV_WR_RDMA_READ, addr, 64, mb->lkey, (uintptr_t)ma->addr, ma->rkey,
			0x72, IBV_SEND_SIGNALED);
}

static void recv_reused(void)
{
	char *rb = mb->addr;
	NEED(recv_at(&b, rb, 256, mb->lkey, 0x70) == 0);
	NEED(recv_again(rb + 64) == 0);
	NEED(read_into(rb + 32) == 0);
	ok(b.scq);
}

SITE static int dereg(struct ibv_mr *mr)
{
	NOTAIL(ibv_dereg_mr(mr));
}

static void dereg_after_err(void)
{
	NEED(recv_at(&b, mb->addr, 256, mb->lkey, 0xf0) == 0);
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_ERR };
	NEED(ibv_modify_qp(b.qp, &at, IBV_QP_STATE) == 0);
	void *buf = mb->addr;
	NEED(ibv_dereg_mr(mb) == 0);
	mb = ibv_reg_mr(p.pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	NEED(mb);
}

SITE static int rereg(struct ibv_mr *mr)
{
	NOTAIL(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
}

/* Its outcome depends on the device: printed for the test to judge. */
static void rereg_scenario(void)
{
	NEED(recv_at(&b, mb->addr, 256, mb->lkey, 0x85) == 0);
	int rc = rereg(mb);
	printf("rereg: %d (errno %d)\n", rc, rc ? errno : 0);
}

static void dereg_scenario(void)
{
	NEED(recv_at(&b, mb->addr, 256, mb->lkey, 0x80) == 0);
	void *buf = mb->addr;
	NEED(dereg(mb) == 0);
	mb = ibv_reg_mr(p.pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	NEED(mb);
}

SITE static int recv_other(void *addr)
{
	return recv_at(&a, addr, 64, mb->lkey, 0x121);
}

SITE static int read_other(void *addr)
{
	return post_sge(&a, IBV_WR_RDMA_READ, addr, 64, mb->lkey, (uintptr_t)ma->addr, ma->rkey,
			0x122, IBV_SEND_SIGNALED);
}

SITE static int srq_other(struct ibv_srq *srq, void *addr)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = 64, .lkey = mb->lkey };
	struct ibv_recv_wr wr = { .wr_id = 0x123, .sg_list = &sge, .num_sge = 1 }, *bad;
	NOTAIL(ibv_post_srq_recv(srq, &wr, &bad));
}

static void recv_cross(void)
{
	char *rb = mb->addr;
	NEED(recv_at(&b, rb, 256, mb->lkey, 0x120) == 0);
	NEED(recv_other(rb + 128) == 0);
	NEED(read_other(rb + 64) == 0);
	ok(a.scq);
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 8, .max_sge = 1 } };
	struct ibv_srq *s = ibv_create_srq(p.pd, &sa);
	NEED(s);
	NEED(srq_other(s, rb + 192) == 0);
	/* Apart from every posted receive: no finding. */
	NEED(recv_at(&a, rb + 1024, 64, mb->lkey, 0x124) == 0);
	NEED(ibv_destroy_srq(s) == 0);
}

static int destroy(struct ibv_qp *qp);
static int destroy_cq(struct ibv_cq *cq);

/* The requester's QP, then its send CQ, at the sites that report them;
 * then everything else. */
static void destroy_requester_first(void)
{
	NEED(destroy(a.qp) == 0);
	NEED(destroy_cq(a.scq) == 0);
	NEED(ibv_destroy_cq(a.rcq) == 0);
	end_destroy(&b);
	mr_free(ma);
	mr_free(mb);
	probe_close(&p);
}

SITE static int uc_write_then_touch(char *buf)
{
	int rc = post_sge(&a, IBV_WR_RDMA_WRITE, buf, 64, ma->lkey, (uintptr_t)mb->addr + 256,
			  mb->rkey, 0xd1, IBV_SEND_SIGNALED);
	buf[5] ^= 0x5a; /* too early */
	return rc;
}

SITE static int uc_recv_again(void *addr)
{
	return recv_at(&b, addr, 64, mb->lkey, 0xd5);
}

static void uc(void)
{
	char *buf = ma->addr;
	memset(buf, 'u', 256);
	NEED(uc_write_then_touch(buf) == 0);
	ok(a.scq);
	/* A SEND left alone until its completion: no finding. */
	NEED(recv_at(&b, mb->addr, 128, mb->lkey, 0xd2) == 0);
	NEED(post_sge(&a, IBV_WR_SEND, buf + 128, 64, ma->lkey, 0, 0, 0xd3, IBV_SEND_SIGNALED) ==
	     0);
	ok(a.scq);
	ok(b.rcq);
	char *rb = (char *)mb->addr + 512;
	NEED(recv_at(&b, rb, 128, mb->lkey, 0xd4) == 0);
	NEED(uc_recv_again(rb + 64) == 0);
	NEED(post_sge(&a, IBV_WR_RDMA_WRITE, buf, 64, ma->lkey, (uintptr_t)mb->addr + 1024,
		      mb->rkey, 0xd6, IBV_SEND_SIGNALED) == 0);
	sleep_ms(50); /* done on the wire, never polled */
	destroy_requester_first();
}

static struct ibv_qp *ud_qp(struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_UD;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	struct ibv_qp *qp = ibv_create_qp(p.pd, &ia);
	NEED(qp);
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x1111 };
	NEED(ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) ==
	     0);
	at.qp_state = IBV_QPS_RTR;
	NEED(ibv_modify_qp(qp, &at, IBV_QP_STATE) == 0);
	at.qp_state = IBV_QPS_RTS;
	at.sq_psn = 0;
	NEED(ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0);
	return qp;
}

/* Inlined: the site is its caller's. */
#define INLINE static inline __attribute__((always_inline))

INLINE int ud_send(struct ibv_qp *qp, struct ibv_ah *ah, uint32_t qpn, void *buf, uint64_t id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 64, .lkey = ma->lkey };
	struct ibv_send_wr wr, *bad;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = 0x1111;
	return ibv_post_send(qp, &wr, &bad);
}

INLINE int ud_recv(struct ibv_qp *qp, void *buf, uint64_t id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 40 + 64, .lkey = mb->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad;
	return ibv_post_recv(qp, &wr, &bad);
}

SITE static int ud_send_then_touch(struct ibv_qp *qp, struct ibv_ah *ah, uint32_t qpn, char *buf)
{
	int rc = ud_send(qp, ah, qpn, buf, 0x141);
	buf[3] ^= 0x5a;
	return rc;
}

SITE static int ud_recv_again(struct ibv_qp *qp, char *buf)
{
	return ud_recv(qp, buf, 0x143);
}

static void ud(void)
{
	struct ibv_cq *scq = ibv_create_cq(p.ctx, 16, NULL, NULL, 0);
	struct ibv_cq *rcq = ibv_create_cq(p.ctx, 16, NULL, NULL, 0);
	NEED(scq && rcq);
	struct ibv_qp *s = ud_qp(scq), *r = ud_qp(rcq);
	struct ibv_ah_attr aa;
	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	aa.grh.dgid = p.gid;
	aa.grh.sgid_index = (uint8_t)p.gid_index;
	aa.grh.hop_limit = 64;
	aa.port_num = 1;
	struct ibv_ah *ah = ibv_create_ah(p.pd, &aa);
	NEED(ah);
	char *buf = ma->addr, *rb = mb->addr;
	memset(buf, 'u', 256);
	NEED(ud_recv(r, rb, 0x140) == 0);
	NEED(ud_send_then_touch(s, ah, r->qp_num, buf) == 0);
	ok(scq);
	ok(rcq);
	NEED(ud_recv(r, rb + 512, 0x142) == 0);
	NEED(ud_recv_again(r, rb + 512 + 32) == 0);
	NEED(ud_send(s, ah, r->qp_num, buf + 128, 0x144) == 0);
	ok(rcq);
	sleep_ms(50); /* sent, never polled */
	NEED(destroy(s) == 0);
	NEED(destroy_cq(scq) == 0);
	NEED(ibv_destroy_qp(r) == 0);
	NEED(ibv_destroy_cq(rcq) == 0);
	NEED(ibv_destroy_ah(ah) == 0);
}

SITE static int ex_send_then_touch(struct ibv_qp_ex *x, char *buf)
{
	ibv_wr_start(x);
	x->wr_id = 0x151;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(x);
	ibv_wr_set_sge(x, ma->lkey, (uintptr_t)buf, 64);
	int rc = ibv_wr_complete(x);
	buf[7] ^= 0x5a;
	return rc;
}

SITE static int ex_read_into(struct ibv_qp_ex *x, char *buf)
{
	ibv_wr_start(x);
	x->wr_id = 0x152;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_read(x, mb->rkey, (uintptr_t)mb->addr);
	ibv_wr_set_sge(x, ma->lkey, (uintptr_t)buf, 64);
	NOTAIL(ibv_wr_complete(x));
}

static int ex_write(struct ibv_qp_ex *x, struct ibv_mr *mr, uint64_t id)
{
	ibv_wr_start(x);
	x->wr_id = id;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(x, mb->rkey, (uintptr_t)mb->addr + 2048);
	ibv_wr_set_sge(x, mr->lkey, (uintptr_t)mr->addr, 64);
	return ibv_wr_complete(x);
}

SITE static int ex_dereg(struct ibv_mr *mr)
{
	NOTAIL(ibv_dereg_mr(mr));
}

SITE static int ex_destroy(struct ibv_qp *qp)
{
	NOTAIL(ibv_destroy_qp(qp));
}

SITE static int ex_destroy_cq(struct ibv_cq *cq)
{
	NOTAIL(ibv_destroy_cq(cq));
}

/* x, made with ibv_create_qp_ex (posting `ops` through ibv_wr_*),
 * connected to y. */
static void ex_pair(struct end *x, struct end *y, uint64_t ops)
{
	static const struct pair_opts o = { .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
					    .rnr_timer = 1 };
	int acc = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	x->scq = ibv_create_cq(p.ctx, 64, NULL, NULL, 0);
	x->rcq = ibv_create_cq(p.ctx, 64, NULL, NULL, 0);
	NEED(x->scq && x->rcq);
	struct ibv_qp_init_attr_ex ia;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = x->scq;
	ia.recv_cq = x->rcq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 16;
	ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ia.pd = p.pd;
	ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	ia.send_ops_flags = ops;
	x->qp = ibv_create_qp_ex(p.ctx, &ia);
	NEED(x->qp);
	end_make(&p, y, &o, 0);
	end_init(x, acc);
	end_init(y, acc);
	end_rtr(&p, x, y->qp->qp_num, &o);
	end_rtr(&p, y, x->qp->qp_num, &o);
	end_rts(x, &o);
	end_rts(y, &o);
}

static void ex(void)
{
	struct end x, y;
	ex_pair(&x, &y, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_READ);
	struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(x.qp);
	char *buf = ma->addr;
	memset(buf, 'x', 512);
	struct ibv_sge sge = { .addr = (uintptr_t)mb->addr, .length = 256, .lkey = mb->lkey };
	struct ibv_recv_wr rw = { .wr_id = 0x150, .sg_list = &sge, .num_sge = 1 }, *rbad;
	NEED(ibv_post_recv(y.qp, &rw, &rbad) == 0);
	NEED(ex_send_then_touch(qx, buf) == 0);
	ok(x.scq);
	ok(y.rcq);
	/* A receive of x's, then a READ of x's into its buffer. */
	sge.addr = (uintptr_t)buf + 1024;
	sge.lkey = ma->lkey;
	rw.wr_id = 0x153;
	NEED(ibv_post_recv(x.qp, &rw, &rbad) == 0);
	NEED(ex_read_into(qx, buf + 1024 + 32) == 0);
	ok(x.scq);
	/* An outstanding WRITE's MR deregistered. */
	struct ibv_mr *mx = mr_make(&p, 4096, IBV_ACCESS_LOCAL_WRITE);
	NEED(ex_write(qx, mx, 0x154) == 0);
	sleep_ms(50); /* done on the wire, never polled */
	void *mem = mx->addr;
	NEED(ex_dereg(mx) == 0);
	struct ibv_wc wc;
	NEED(poll_one(x.scq, 5000, &wc) == 1);
	free(mem);
	/* Destroyed with a signalled WRITE unpolled, then its CQ. */
	NEED(ex_write(qx, ma, 0x155) == 0);
	sleep_ms(50);
	NEED(ex_destroy(x.qp) == 0);
	NEED(ex_destroy_cq(x.scq) == 0);
	NEED(ibv_destroy_cq(x.rcq) == 0);
	end_destroy(&y);
}

SITE static int dealloc_ex(struct ibv_mw *mw)
{
	NOTAIL(ibv_dealloc_mw(mw));
}

SITE static int dealloc(struct ibv_mw *mw)
{
	NOTAIL(ibv_dealloc_mw(mw));
}

SITE static int dealloc_invalidating(struct ibv_mw *mw)
{
	NOTAIL(ibv_dealloc_mw(mw));
}

SITE static int dealloc_type1(struct ibv_mw *mw)
{
	NOTAIL(ibv_dealloc_mw(mw));
}

/* Any completion on cq (a bind's status is not what is tested here). */
static void drain_one(struct ibv_cq *cq)
{
	struct ibv_wc wc;
	NEED(poll_one(cq, 5000, &wc) == 1);
}

static int bind2(struct ibv_mw *mw, struct ibv_mr *mr, uint32_t rkey, uint64_t id)
{
	struct ibv_send_wr wr, *bad;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = rkey;
	wr.bind_mw.bind_info.mr = mr;
	wr.bind_mw.bind_info.addr = (uintptr_t)mr->addr;
	wr.bind_mw.bind_info.length = 4096;
	wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
	return ibv_post_send(b.qp, &wr, &bad);
}

static void dealloc_mw(void)
{
	struct ibv_mr *w = mr_make(&p, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
						     IBV_ACCESS_MW_BIND);
	/* Bound, the bind's completion not polled. */
	struct ibv_mw *m1 = ibv_alloc_mw(p.pd, IBV_MW_TYPE_2);
	NEED(m1);
	NEED(bind2(m1, w, ibv_inc_rkey(m1->rkey), 0x101) == 0);
	NEED(dealloc(m1) == 0);
	drain_one(b.scq);
	/* Bound and polled, then invalidated, the invalidation not polled. */
	struct ibv_mw *m2 = ibv_alloc_mw(p.pd, IBV_MW_TYPE_2);
	NEED(m2);
	uint32_t k2 = ibv_inc_rkey(m2->rkey);
	NEED(bind2(m2, w, k2, 0x102) == 0);
	drain_one(b.scq);
	struct ibv_send_wr inv, *bad;
	memset(&inv, 0, sizeof(inv));
	inv.wr_id = 0x103;
	inv.opcode = IBV_WR_LOCAL_INV;
	inv.send_flags = IBV_SEND_SIGNALED;
	inv.invalidate_rkey = k2;
	NEED(ibv_post_send(b.qp, &inv, &bad) == 0);
	NEED(dealloc_invalidating(m2) == 0);
	drain_one(b.scq);
	/* Type 1: ibv_bind_mw posts the bind itself. */
	struct ibv_mw *m3 = ibv_alloc_mw(p.pd, IBV_MW_TYPE_1);
	NEED(m3);
	struct ibv_mw_bind mb1 = { .wr_id = 0x104, .send_flags = IBV_SEND_SIGNALED,
				   .bind_info = { .mr = w, .addr = (uintptr_t)w->addr,
						  .length = 4096,
						  .mw_access_flags = IBV_ACCESS_REMOTE_WRITE } };
	NEED(ibv_bind_mw(b.qp, m3, &mb1) == 0);
	NEED(dealloc_type1(m3) == 0);
	drain_one(b.scq);
	/* Bound through ibv_wr_bind_mw, the bind's completion not polled. */
	struct end x, y;
	ex_pair(&x, &y, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_BIND_MW);
	struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(x.qp);
	struct ibv_mw *m5 = ibv_alloc_mw(p.pd, IBV_MW_TYPE_2);
	NEED(m5);
	struct ibv_mw_bind_info info = { .mr = w, .addr = (uintptr_t)w->addr, .length = 4096,
					 .mw_access_flags = IBV_ACCESS_REMOTE_WRITE };
	ibv_wr_start(qx);
	qx->wr_id = 0x106;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(qx, m5, ibv_inc_rkey(m5->rkey), &info);
	NEED(ibv_wr_complete(qx) == 0);
	NEED(dealloc_ex(m5) == 0);
	drain_one(x.scq);
	end_destroy(&x);
	end_destroy(&y);
	/* Bound, its completion polled: nothing outstanding names it. */
	struct ibv_mw *m4 = ibv_alloc_mw(p.pd, IBV_MW_TYPE_2);
	NEED(m4);
	NEED(bind2(m4, w, ibv_inc_rkey(m4->rkey), 0x105) == 0);
	drain_one(b.scq);
	NEED(ibv_dealloc_mw(m4) == 0);
	mr_free(w);
}

SITE static int destroy(struct ibv_qp *qp)
{
	NOTAIL(ibv_destroy_qp(qp));
}

SITE static int destroy_cq(struct ibv_cq *cq)
{
	NOTAIL(ibv_destroy_cq(cq));
}

static void destroy_qp(void)
{
	NEED(post_sge(&a, IBV_WR_RDMA_WRITE, ma->addr, 64, ma->lkey, (uintptr_t)mb->addr,
		      mb->rkey, 0x90, IBV_SEND_SIGNALED) == 0);
	sleep_ms(50); /* done on the wire, never polled */
	/* Refused while the QP uses it: nothing torn down, no finding. */
	NEED(ibv_destroy_cq(a.scq) == EBUSY);
	destroy_requester_first();
}

static void unsignalled_tail(void)
{
	for (int i = 0; i < 3; i++)
		NEED(post_sge(&a, IBV_WR_RDMA_WRITE, (char *)ma->addr + 64 * i, 64, ma->lkey,
			      (uintptr_t)mb->addr + 64 * i, mb->rkey, 0xd0 + i, 0) == 0);
	sleep_ms(50); /* done on the wire; nothing to poll */
	NEED(ibv_destroy_qp(a.qp) == 0);
	NEED(ibv_destroy_cq(a.scq) == 0);
	NEED(ibv_destroy_cq(a.rcq) == 0);
	end_destroy(&b);
	mr_free(ma);
	mr_free(mb);
	probe_close(&p);
}

/* a SENDs from its receive buffer; b answers into it. `recv_first`: a
 * polls the answer's completion before the SEND's. */
static void send_from_recv_once(int recv_first)
{
	char *buf = ma->addr;
	memset(buf, 'k', 64);
	NEED(recv_at(&a, buf, 64, ma->lkey, 0xe0) == 0);
	NEED(recv_at(&b, mb->addr, 64, mb->lkey, 0xe1) == 0);
	NEED(post_sge(&a, IBV_WR_SEND, buf, 64, ma->lkey, 0, 0, 0xe2, IBV_SEND_SIGNALED) == 0);
	ok(b.rcq);
	memset(mb->addr, 'r', 64);
	NEED(post_sge(&b, IBV_WR_SEND, mb->addr, 64, mb->lkey, 0, 0, 0xe3, IBV_SEND_SIGNALED) == 0);
	ok(b.scq);
	sleep_ms(20); /* the answer has landed in buf */
	if (recv_first) {
		ok(a.rcq);
		ok(a.scq);
	} else {
		ok(a.scq);
		ok(a.rcq);
	}
	NEED(buf[0] == 'r');
}

static void send_from_recv(void)
{
	send_from_recv_once(0);
	send_from_recv_once(1);
}

SITE static int to_reset(struct ibv_qp *qp)
{
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_RESET };
	NOTAIL(ibv_modify_qp(qp, &at, IBV_QP_STATE));
}

static void reset(void)
{
	NEED(post_sge(&a, IBV_WR_RDMA_WRITE, ma->addr, 64, ma->lkey, (uintptr_t)mb->addr,
		      mb->rkey, 0xa0, IBV_SEND_SIGNALED) == 0);
	sleep_ms(50);
	NEED(to_reset(a.qp) == 0);
}

SITE static int one_recv_too_many(char *buf, int i)
{
	return recv_at(&b, buf + 64 * i, 64, mb->lkey, 0xb0 + i);
}

static void overrun(void)
{
	int cqe = b.rcq->cqe;
	NEED(cqe + 1 <= 16);
	for (int i = 0; i < cqe; i++)
		NEED(recv_at(&b, (char *)mb->addr + 64 * i, 64, mb->lkey, 0xb0 + i) == 0);
	NEED(one_recv_too_many(mb->addr, cqe) == 0);
}

SITE static int srq_again(struct ibv_srq *srq, void *addr)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = 64, .lkey = mb->lkey };
	struct ibv_recv_wr wr = { .wr_id = 0xc1, .sg_list = &sge, .num_sge = 1 }, *bad;
	NOTAIL(ibv_post_srq_recv(srq, &wr, &bad));
}

static void srq(void)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 8, .max_sge = 1 } };
	struct ibv_srq *s = ibv_create_srq(p.pd, &sa);
	NEED(s);
	struct ibv_sge sge = { .addr = (uintptr_t)mb->addr, .length = 128, .lkey = mb->lkey };
	struct ibv_recv_wr wr = { .wr_id = 0xc0, .sg_list = &sge, .num_sge = 1 }, *bad;
	NEED(ibv_post_srq_recv(s, &wr, &bad) == 0);
	NEED(srq_again(s, (char *)mb->addr + 64) == 0);
	NEED(ibv_destroy_srq(s) == 0);
}

int main(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : "clean";
	pair(strcmp(s, "overrun") == 0 ? 2 : 0, strcmp(s, "uc") == 0);
	if (strcmp(s, "clean") == 0)
		clean();
	else if (strcmp(s, "send_modified") == 0)
		send_modified();
	else if (strcmp(s, "repost") == 0)
		repost();
	else if (strcmp(s, "recv_reused") == 0)
		recv_reused();
	else if (strcmp(s, "dereg") == 0)
		dereg_scenario();
	else if (strcmp(s, "rereg") == 0)
		rereg_scenario();
	else if (strcmp(s, "uc") == 0) {
		uc();
		printf("%s done\n", s);
		return 0;
	}
	else if (strcmp(s, "destroy_qp") == 0) {
		destroy_qp();
		printf("%s done\n", s);
		return 0;
	} else if (strcmp(s, "unsignalled_tail") == 0) {
		unsignalled_tail();
		printf("%s done\n", s);
		return 0;
	} else if (strcmp(s, "dereg_after_err") == 0)
		dereg_after_err();
	else if (strcmp(s, "send_from_recv") == 0)
		send_from_recv();
	else if (strcmp(s, "reset") == 0)
		reset();
	else if (strcmp(s, "overrun") == 0)
		overrun();
	else if (strcmp(s, "srq") == 0)
		srq();
	else if (strcmp(s, "ud") == 0)
		ud();
	else if (strcmp(s, "ex") == 0)
		ex();
	else if (strcmp(s, "recv_cross") == 0)
		recv_cross();
	else if (strcmp(s, "dealloc_mw") == 0)
		dealloc_mw();
	else {
		fprintf(stderr, "no scenario %s\n", s);
		return 2;
	}
	teardown();
	printf("%s done\n", s);
	return 0;
}
