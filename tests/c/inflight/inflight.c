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
 *                  polled, then ibv_destroy_cq of its CQ (teardown_qp, _cq)
 *   reset          a move to RESET with such a WRITE outstanding
 *   overrun        more receives posted than their CQ has entries
 *   srq            an SRQ's receive buffer posted twice
 *   recv_cross     a buffer of a receive posted on one QP given, before it
 *                  completed, to a receive of the other QP, to a READ of
 *                  the other QP, and to an SRQ's receive
 *   dealloc_mw     ibv_dealloc_mw of a type 2 window whose posted bind has
 *                  not completed, of one whose local invalidation has not,
 *                  and of a type 1 window whose ibv_bind_mw has not; a
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

static void pair(int cqe)
{
	struct pair_opts o = { .cqe = cqe,
			       .access_a = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
			       .access_b = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
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
	NEED(destroy(a.qp) == 0);
	NEED(destroy_cq(a.scq) == 0);
	NEED(ibv_destroy_cq(a.rcq) == 0);
	end_destroy(&b);
	mr_free(ma);
	mr_free(mb);
	probe_close(&p);
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
	pair(strcmp(s, "overrun") == 0 ? 2 : 0);
	if (strcmp(s, "clean") == 0)
		clean();
	else if (strcmp(s, "send_modified") == 0)
		send_modified();
	else if (strcmp(s, "recv_reused") == 0)
		recv_reused();
	else if (strcmp(s, "dereg") == 0)
		dereg_scenario();
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
