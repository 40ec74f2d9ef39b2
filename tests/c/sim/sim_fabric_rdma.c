/*
 * RC between two processes on the sim fabric: RDMA WRITE (with imm), RDMA
 * READ, atomics and a fragmented SEND reach the other process's memory,
 * and the responder's checks (rkey, bounds, access flags) give the
 * requester the completion statuses hardware gives. The responder sits
 * blocked in read(2) on a socket while the requester works on its memory:
 * only its background progress engine can answer.
 *
 * The process forks before any verbs call; the halves talk over a
 * socketpair (addresses, "check this" requests) as real programs do over TCP.
 */
#include <infiniband/verbs.h>
#include <arpa/inet.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/first_device.h"
#include "../common/rc_connect.h"
#include "check.h"
#include "sock_io.h"

#define BUF (256 * 1024)
#define SEND_LEN 100000
/* Longer than a ring slot: arrives in fragments, placed one by one. */
#define WIMM_LEN 20000
/* Where a WRITE whose first fragment fits but not the rest starts. */
#define TAIL (BUF - 3 * 4096)

struct addr {
	uint16_t lid;
	uint32_t qpn;
	uint64_t buf, ro_buf;
	uint32_t rkey, ro_rkey;
};

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr, *ro_mr;
	char *buf, *ro_buf;
	uint16_t lid;
};


static void open_side(struct side *s)
{
	s->ctx = open_first();
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, 64, NULL, NULL, 0);
	CHECK(s->pd && s->cq);
	s->buf = aligned_alloc(4096, BUF);
	s->ro_buf = aligned_alloc(4096, BUF);
	CHECK(s->buf && s->ro_buf);
	memset(s->buf, 0, BUF);
	memset(s->ro_buf, 0x77, BUF);
	s->mr = ibv_reg_mr(s->pd, s->buf, BUF,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC);
	/* Remote read only: remote writes and atomics must be refused. */
	s->ro_mr = ibv_reg_mr(s->pd, s->ro_buf, BUF, IBV_ACCESS_REMOTE_READ);
	CHECK(s->mr && s->ro_mr);
	struct ibv_port_attr pa;
	CHECK(ibv_query_port(s->ctx, 1, &pa) == 0);
	s->lid = pa.lid;
}

/* A fresh RC QP of `s`, connected with the peer's through the socket;
 * with `hold`, it stays in INIT until the peer says 'p' (posted). */
static struct ibv_qp *connect_qp_hold(struct side *s, int hold)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = s->cq, .recv_cq = s->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(s->pd, &ia);
	CHECK(qp);
	struct addr me = { s->lid, qp->qp_num, (uintptr_t)s->buf, (uintptr_t)s->ro_buf,
			   s->mr->rkey, s->ro_mr->rkey },
		    peer;
	xsend(&me, sizeof me);
	xrecv(&peer, sizeof peer);
	rc_init(qp, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	if (hold) {
		char c;
		xrecv(&c, 1);
		CHECK(c == 'p');
	}
	struct rc_path p = { .qpn = peer.qpn, .lid = peer.lid, .rd_atomic = 4, .rnr_timer = 12,
			     .timeout = 14, .retry_cnt = 7, .rnr_retry = 7 };
	rc_rtr_rts(qp, &p);
	/* The peer's addresses, for the requester. */
	static struct addr last;
	last = peer;
	qp->qp_context = &last;
	return qp;
}

static struct ibv_qp *connect_qp(struct side *s) { return connect_qp_hold(s, 0); }

static struct ibv_wc wait_wc(struct ibv_cq *cq)
{
	struct ibv_wc wc;
	int n;
	for (long i = 0; (n = ibv_poll_cq(cq, 1, &wc)) == 0; i++)
		CHECK(i < 2000000000L);
	CHECK(n == 1);
	return wc;
}

static int post(struct ibv_qp *qp, enum ibv_wr_opcode op, void *laddr, uint32_t len, uint32_t lkey,
		uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = { (uintptr_t)laddr, len, lkey };
	struct ibv_send_wr wr = { .wr_id = op, .sg_list = &sge, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_CMP_AND_SWP) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = op == IBV_WR_ATOMIC_FETCH_AND_ADD ? 5 : 0x1111;
		wr.wr.atomic.swap = 0x2222;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	wr.imm_data = htonl(0xabcd);
	return ibv_post_send(qp, &wr, &bad);
}

/* One request that the responder must refuse with `want`; the QP then
 * moves to the error state and flushes what follows. */
static void refused(struct side *s, enum ibv_wr_opcode op, uint64_t raddr, uint32_t rkey,
		    uint32_t len, enum ibv_wc_status want)
{
	struct ibv_qp *qp = connect_qp(s);
	/* Not before the responder's QP is in RTS: a request it refuses
	 * moves it to ERR (a class C error), and RTS would then fail. */
	char ready;
	xrecv(&ready, 1);
	CHECK(ready == 'r');
	CHECK(post(qp, op, s->buf, len, s->mr->lkey, raddr, rkey) == 0);
	struct ibv_wc wc = wait_wc(s->cq);
	if (wc.status != want)
		fprintf(stderr, "op %d: status %s, want %s\n", op, ibv_wc_status_str(wc.status),
			ibv_wc_status_str(want));
	CHECK(wc.status == want);
	CHECK(post(qp, IBV_WR_RDMA_WRITE, s->buf, 8, s->mr->lkey, raddr, rkey) == 0);
	wc = wait_wc(s->cq);
	CHECK(wc.status == IBV_WC_WR_FLUSH_ERR);
	CHECK(ibv_destroy_qp(qp) == 0);
}

static void requester(void)
{
	struct side s;
	open_side(&s);
	struct ibv_qp *qp = connect_qp(&s);
	struct addr *p = qp->qp_context;
	char ok;

	/* RDMA WRITE: the responder finds the pattern in its memory. */
	for (int i = 0; i < BUF; i++)
		s.buf[i] = (char)(i * 7 + 1);
	CHECK(post(qp, IBV_WR_RDMA_WRITE, s.buf, BUF, s.mr->lkey, p->buf, p->rkey) == 0);
	struct ibv_wc wc = wait_wc(s.cq);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_WRITE && wc.byte_len == BUF);
	xsend("w", 1);
	xrecv(&ok, 1);
	CHECK(ok == 'y');

	/* RDMA READ: the responder filled its buffer with another pattern. */
	memset(s.buf, 0, BUF);
	CHECK(post(qp, IBV_WR_RDMA_READ, s.buf, BUF, s.mr->lkey, p->buf, p->rkey) == 0);
	wc = wait_wc(s.cq);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_READ && wc.byte_len == BUF);
	CHECK(*(uint64_t *)s.buf == 0x1111);
	for (int i = 8; i < BUF; i++)
		CHECK(s.buf[i] == (char)(i * 3 + 2));

	/* Atomics on the responder's first word (its pattern: 0x1111). */
	uint64_t *word = (uint64_t *)s.buf;
	*word = 0;
	CHECK(post(qp, IBV_WR_ATOMIC_CMP_AND_SWP, word, 8, s.mr->lkey, p->buf, p->rkey) == 0);
	wc = wait_wc(s.cq);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_COMP_SWAP && *word == 0x1111);
	CHECK(post(qp, IBV_WR_ATOMIC_FETCH_AND_ADD, word, 8, s.mr->lkey, p->buf, p->rkey) == 0);
	wc = wait_wc(s.cq);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_FETCH_ADD && *word == 0x2222);

	/* WRITE with immediate and a fragmented SEND consume receives there. */
	memset(s.buf, 0x42, SEND_LEN);
	CHECK(post(qp, IBV_WR_RDMA_WRITE_WITH_IMM, s.buf, WIMM_LEN, s.mr->lkey, p->buf + 64, p->rkey) ==
	      0);
	CHECK(wait_wc(s.cq).status == IBV_WC_SUCCESS);
	CHECK(post(qp, IBV_WR_SEND, s.buf, SEND_LEN, s.mr->lkey, 0, 0) == 0);
	CHECK(wait_wc(s.cq).status == IBV_WC_SUCCESS);
	xsend("s", 1);
	xrecv(&ok, 1);
	CHECK(ok == 'y');

	/* What the responder refuses. */
	refused(&s, IBV_WR_RDMA_WRITE, p->buf, p->rkey ^ 0x100, 8, IBV_WC_REM_ACCESS_ERR);
	refused(&s, IBV_WR_RDMA_READ, p->buf + BUF - 4, p->rkey, 8, IBV_WC_REM_ACCESS_ERR);
	refused(&s, IBV_WR_RDMA_WRITE, p->ro_buf, p->ro_rkey, 8, IBV_WC_REM_ACCESS_ERR);
	refused(&s, IBV_WR_ATOMIC_FETCH_AND_ADD, p->ro_buf, p->ro_rkey, 8, IBV_WC_REM_ACCESS_ERR);
	/* A receive too small for the SEND (the responder posts 16 bytes). */
	refused(&s, IBV_WR_SEND, p->buf, 0, 64, IBV_WC_REM_INV_REQ_ERR);
	/* Fragmented WRITEs: a bad key, and one that starts inside the
	 * region and runs past its end (refused as a whole, as the responder
	 * checks a RETH: nothing of it lands; the responder checks). */
	refused(&s, IBV_WR_RDMA_WRITE, p->buf, p->rkey ^ 0x100, 65536, IBV_WC_REM_ACCESS_ERR);
	refused(&s, IBV_WR_RDMA_WRITE, p->buf + TAIL, p->rkey, 65536, IBV_WC_REM_ACCESS_ERR);
	/* The read-only region can be read. */
	struct ibv_qp *qp2 = connect_qp(&s);
	CHECK(post(qp2, IBV_WR_RDMA_READ, s.buf, 4096, s.mr->lkey, p->ro_buf, p->ro_rkey) == 0);
	CHECK(wait_wc(s.cq).status == IBV_WC_SUCCESS && s.buf[4095] == 0x77);
	/* Requests that reach the responder while its QP is still in INIT
	 * wait there for RTR (as retries would deliver them), in order. */
	struct ibv_qp *qp3 = connect_qp(&s);
	memset(s.buf, 0x5c, 64);
	CHECK(post(qp3, IBV_WR_SEND, s.buf, 32, s.mr->lkey, 0, 0) == 0);
	CHECK(post(qp3, IBV_WR_RDMA_WRITE, s.buf, 64, s.mr->lkey, p->buf + 4096, p->rkey) == 0);
	xsend("p", 1);
	wc = wait_wc(s.cq);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND);
	wc = wait_wc(s.cq);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_WRITE);
	xrecv(&ok, 1);
	CHECK(ok == 'y');
	CHECK(ibv_destroy_qp(qp3) == 0);
	/* The responder exits: the next request's retries run out. */
	xsend("q", 1);
	xrecv(&ok, 1);
	int st;
	CHECK(wait(&st) > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(post(qp2, IBV_WR_RDMA_WRITE, s.buf, 8, s.mr->lkey, p->buf, p->rkey) == 0);
	wc = wait_wc(s.cq);
	CHECK(wc.status == IBV_WC_RETRY_EXC_ERR);
	CHECK(ibv_destroy_qp(qp2) == 0);
	CHECK(ibv_destroy_qp(qp) == 0);
	printf("requester: ");
}

static void responder(void)
{
	struct side s;
	open_side(&s);
	struct ibv_qp *qp = connect_qp(&s);
	char *rbuf = malloc(SEND_LEN);
	struct ibv_mr *rmr = ibv_reg_mr(s.pd, rbuf, SEND_LEN, IBV_ACCESS_LOCAL_WRITE);
	CHECK(rbuf && rmr);
	for (int i = 0; i < 2; i++) {
		struct ibv_sge sge = { (uintptr_t)rbuf, SEND_LEN, rmr->lkey };
		struct ibv_recv_wr wr = { .wr_id = 100 + i, .sg_list = &sge, .num_sge = 1 }, *bad;
		CHECK(ibv_post_recv(qp, &wr, &bad) == 0);
	}
	char c;
	/* Blocked here while the requester writes: the progress thread serves it. */
	xrecv(&c, 1);
	CHECK(c == 'w');
	for (int i = 0; i < BUF; i++)
		CHECK(s.buf[i] == (char)(i * 7 + 1));
	for (int i = 0; i < BUF; i++)
		s.buf[i] = (char)(i * 3 + 2);
	*(uint64_t *)s.buf = 0x1111;
	xsend("y", 1);
	xrecv(&c, 1);
	CHECK(c == 's');
	struct ibv_wc wc = wait_wc(s.cq);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM);
	CHECK((wc.wc_flags & IBV_WC_WITH_IMM) && ntohl(wc.imm_data) == 0xabcd &&
	      wc.byte_len == WIMM_LEN);
	CHECK(*(uint64_t *)s.buf == 0x2227); /* swapped to 0x2222, then +5 */
	for (int i = 64; i < 64 + WIMM_LEN; i++)
		CHECK(s.buf[i] == 0x42);
	CHECK(s.buf[64 + WIMM_LEN] == (char)((64 + WIMM_LEN) * 3 + 2));
	wc = wait_wc(s.cq);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV && wc.byte_len == SEND_LEN);
	CHECK(wc.src_qp == ((struct addr *)qp->qp_context)->qpn);
	for (int i = 0; i < SEND_LEN; i++)
		CHECK(rbuf[i] == 0x42);
	xsend("y", 1);
	/* The refused requests, each on a QP of its own. */
	for (int i = 0; i < 8; i++) {
		struct ibv_qp *q = connect_qp(&s);
		if (i == 4) {
			struct ibv_sge sge = { (uintptr_t)rbuf, 16, rmr->lkey };
			struct ibv_recv_wr wr = { .wr_id = 7, .sg_list = &sge, .num_sge = 1 }, *bad;
			CHECK(ibv_post_recv(q, &wr, &bad) == 0);
		}
		/* The 7 refused ones (the 8th reads the read-only region). */
		if (i < 7)
			xsend("r", 1);
		(void)q;
	}
	/* The too-small receive completed in error on this side. */
	wc = wait_wc(s.cq);
	CHECK(wc.status == IBV_WC_LOC_LEN_ERR && wc.wr_id == 7);
	/* Held in INIT while the requester posts. */
	struct ibv_qp *q3 = connect_qp_hold(&s, 1);
	(void)q3;
	struct ibv_sge sge3 = { (uintptr_t)rbuf, 64, rmr->lkey };
	struct ibv_recv_wr wr3 = { .wr_id = 33, .sg_list = &sge3, .num_sge = 1 }, *bad3;
	CHECK(ibv_post_recv(q3, &wr3, &bad3) == 0);
	wc = wait_wc(s.cq);
	CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 33 && wc.byte_len == 32 && rbuf[31] == 0x5c);
	/* The WRITE, posted after the SEND, lands too. Not necessarily before
	 * the SEND's receive completion is seen here: the responder's progress
	 * thread applies the held requests in order while this thread polls,
	 * and verbs give a responder no completion for a WRITE. So wait for it
	 * (bounded: a WRITE that never lands still fails). */
	for (int i = 0; ((volatile char *)s.buf)[4096 + 63] != 0x5c; i++) {
		CHECK(i < 10000);
		usleep(1000);
	}
	xsend("y", 1);
	xrecv(&c, 1);
	CHECK(c == 'q');
	/* The WRITE past the region's end left its start alone. */
	for (int i = TAIL; i < BUF; i++)
		CHECK(s.buf[i] == (char)(i * 3 + 2));
	printf("responder: %d checks passed\n", checks);
	fflush(stdout);
	xsend("y", 1);
	_exit(0);
}

int main(void)
{
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	pid_t pid = fork();
	CHECK(pid >= 0);
	sock = pid == 0 ? sv[1] : sv[0];
	/* Each half keeps only its end: a dead peer is EOF, not a hang. */
	close(pid == 0 ? sv[0] : sv[1]);
	if (pid == 0)
		responder();
	requester();
	DONE("sim_fabric_rdma");
}
