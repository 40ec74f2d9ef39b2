/*
 * RC WRITEs that wait for room in a stopped peer's ring are read from the
 * program's own buffer when they go out (the sim does not copy them at
 * post time). Once the program may have its buffer back before they went
 * out, the sim must have copied them: here the requester posts 3 MiB of
 * 64 KiB WRITEs to a responder it stopped (SIGSTOP, so its 2 MiB ring
 * fills), then gives the buffer back to itself one way (`argv[1]`):
 *   reset    moves its QP to RESET (the requests are discarded);
 *   flush    moves it to ERR and polls a flush completion for each;
 *   error    posts one more WRITE with a bad lkey: the QP goes to ERR,
 *            the waiting ones are flushed and it completes with
 *            IBV_WC_LOC_PROT_ERR after them (polled, as with "flush");
 *   atomic   the same with a misaligned fetch-and-add
 *            (IBV_WC_REM_INV_REQ_ERR, found before it is sent);
 *   destroy  destroys the QP with the requests outstanding;
 *   dereg    deregisters the buffer's MR before the requests completed
 *            (a bug, which must not crash the sim);
 *   rereg    moves the MR to another buffer (IBV_REREG_MR_CHANGE_TRANSLATION,
 *            "conceptually a dereg then a reg": the same bug);
 *   bind     (not a way back: the order of completions) binds a memory
 *            window behind the waiting WRITEs: the sim carries the bind
 *            out at once, but its completion must wait for theirs (a send
 *            queue completes in order); then the responder goes on and
 *            the WRITEs, then the bind, complete;
 * scribbles on and unmaps the buffer, and only then lets the responder go
 * on. The requester must not crash, and every byte that reaches the
 * responder is what was posted. The sim still delivers what was waiting
 * (from its copies) after each of these: for requests that complete in
 * error or are discarded, verbs leave the remote buffer undefined, so the
 * responder waits for all of it and checks it is the posted bytes.
 *
 * The process forks before any verbs call; the halves talk over a
 * socketpair.
 */
#include <infiniband/verbs.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/first_device.h"
#include "../common/rc_connect.h"
#include "check.h"
#include "sock_io.h"

#define MSG (64 * 1024)
#define NMSG 48
#define PATTERN 0xa5

enum how { RESET, FLUSH, ERROR, ATOMIC, DESTROY, DEREG, REREG, BIND };
static const char *const hows[] = { "reset", "flush", "error", "atomic",
				    "destroy", "dereg", "rereg", "bind" };

struct addr {
	uint16_t lid;
	uint32_t qpn;
	uint64_t buf;
	uint32_t rkey;
};


struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char *buf;
};

/* Opens the device, registers `len` bytes (mapped, so they can be
 * unmapped) and connects an RC QP with the peer's. */
static struct addr open_side(struct side *s, size_t len)
{
	s->ctx = open_first();
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, 2 * NMSG, NULL, NULL, 0);
	CHECK(s->pd && s->cq);
	s->buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(s->buf != MAP_FAILED);
	s->mr = ibv_reg_mr(s->pd, s->buf, len,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND);
	CHECK(s->mr);
	struct ibv_qp_init_attr ia = {
		.send_cq = s->cq, .recv_cq = s->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = NMSG + 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	s->qp = ibv_create_qp(s->pd, &ia);
	CHECK(s->qp);
	struct ibv_port_attr pa;
	CHECK(ibv_query_port(s->ctx, 1, &pa) == 0);
	struct addr me = { pa.lid, s->qp->qp_num, (uintptr_t)s->buf, s->mr->rkey }, peer;
	xsend(&me, sizeof me);
	xrecv(&peer, sizeof peer);
	rc_init(s->qp, IBV_ACCESS_REMOTE_WRITE);
	struct rc_path p = { .qpn = peer.qpn, .lid = peer.lid, .rnr_timer = 12, .timeout = 14,
			     .retry_cnt = 7, .rnr_retry = 7 };
	rc_rtr_rts(s->qp, &p);
	return peer;
}

/* Polls the `n` completions a flush (and `bad`, unless -1, an error
 * `status`) produced, which are there by the time the verb that caused them has
 * returned: one per work request, in error, in the order they were
 * posted (a send queue's completions are), and nothing more. */
static void expect_failed(struct ibv_cq *cq, int n, int bad, enum ibv_wc_status status)
{
	struct ibv_wc wc[NMSG + 1];
	int got = 0;
	for (int tries = 0; got < n; tries++) {
		CHECK(tries < 1000);
		int r = ibv_poll_cq(cq, n - got, wc + got);
		CHECK(r >= 0);
		got += r;
	}
	for (int i = 0; i < n; i++) {
		CHECK(wc[i].wr_id == (uint64_t)i);
		CHECK(wc[i].status == (i == bad ? status : IBV_WC_WR_FLUSH_ERR));
	}
	CHECK(ibv_poll_cq(cq, 1, wc) == 0);
}

static void requester(pid_t responder, enum how how)
{
	struct side s;
	struct addr peer = open_side(&s, MSG);
	memset(s.buf, PATTERN, MSG);
	char c;
	xrecv(&c, 1);
	CHECK(c == 'r');
	int st;
	CHECK(kill(responder, SIGSTOP) == 0);
	CHECK(waitpid(responder, &st, WUNTRACED) == responder && WIFSTOPPED(st));
	/* Three times what the stopped responder's ring holds. */
	for (int i = 0; i < NMSG; i++) {
		struct ibv_sge sge = { (uintptr_t)s.buf, MSG, s.mr->lkey };
		struct ibv_send_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED },
				   *bad;
		wr.wr.rdma.remote_addr = peer.buf + (uint64_t)i * MSG;
		wr.wr.rdma.rkey = peer.rkey;
		CHECK(ibv_post_send(s.qp, &wr, &bad) == 0);
	}
	/* Each way, the buffer is the program's again (or it takes it). */
	struct ibv_qp_attr a = { 0 };
	char *moved = NULL;
	switch (how) {
	case RESET:
	case FLUSH:
		a.qp_state = how == RESET ? IBV_QPS_RESET : IBV_QPS_ERR;
		CHECK(ibv_modify_qp(s.qp, &a, IBV_QP_STATE) == 0);
		if (how == FLUSH)
			expect_failed(s.cq, NMSG, -1, IBV_WC_SUCCESS);
		break;
	case ERROR:
	case ATOMIC: {
		/* Refused before it is sent, behind the waiting ones. */
		struct ibv_sge sge = { (uintptr_t)s.buf, MSG, s.mr->lkey };
		struct ibv_send_wr wr = { .wr_id = NMSG, .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED },
				   *bad;
		wr.wr.rdma.remote_addr = peer.buf;
		wr.wr.rdma.rkey = peer.rkey;
		if (how == ERROR) {
			sge.lkey++;
		} else {
			sge.length = 8;
			wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
			wr.wr.atomic.remote_addr = peer.buf + 1;
			wr.wr.atomic.rkey = peer.rkey;
			wr.wr.atomic.compare_add = 1;
		}
		CHECK(ibv_post_send(s.qp, &wr, &bad) == 0);
		expect_failed(s.cq, NMSG + 1, NMSG,
			      how == ERROR ? IBV_WC_LOC_PROT_ERR : IBV_WC_REM_INV_REQ_ERR);
		break;
	}
	case DESTROY:
		CHECK(ibv_destroy_qp(s.qp) == 0);
		break;
	case DEREG:
		CHECK(ibv_dereg_mr(s.mr) == 0);
		break;
	case BIND: {
		struct ibv_mw *mw = ibv_alloc_mw(s.pd, IBV_MW_TYPE_2);
		CHECK(mw);
		struct ibv_send_wr wr = { .wr_id = NMSG, .opcode = IBV_WR_BIND_MW,
					  .send_flags = IBV_SEND_SIGNALED },
				   *bad;
		wr.bind_mw.mw = mw;
		wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
		wr.bind_mw.bind_info.mr = s.mr;
		wr.bind_mw.bind_info.addr = (uintptr_t)s.buf;
		wr.bind_mw.bind_info.length = MSG;
		wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
		CHECK(ibv_post_send(s.qp, &wr, &bad) == 0);
		/* Nothing completes while the WRITEs ahead of it wait. */
		struct ibv_wc wc[NMSG + 1];
		for (int i = 0; i < 50; i++) {
			CHECK(ibv_poll_cq(s.cq, 1, wc) == 0);
			usleep(1000);
		}
		CHECK(kill(responder, SIGCONT) == 0);
		int got = 0;
		for (int tries = 0; got < NMSG + 1; tries++) {
			CHECK(tries < 20000);
			int r = ibv_poll_cq(s.cq, NMSG + 1 - got, wc + got);
			CHECK(r >= 0);
			got += r;
			if (!r)
				usleep(1000);
		}
		for (int i = 0; i <= NMSG; i++) {
			CHECK(wc[i].wr_id == (uint64_t)i);
			CHECK(wc[i].status == IBV_WC_SUCCESS);
			CHECK(wc[i].opcode == (i < NMSG ? IBV_WC_RDMA_WRITE : IBV_WC_BIND_MW));
		}
		CHECK(ibv_dealloc_mw(mw) == 0);
		break;
	}
	case REREG:
		moved = mmap(NULL, MSG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		CHECK(moved != MAP_FAILED);
		CHECK(ibv_rereg_mr(s.mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, moved, MSG, 0) == 0);
		break;
	}
	memset(s.buf, 0, MSG);
	CHECK(munmap(s.buf, MSG) == 0);
	CHECK(kill(responder, SIGCONT) == 0);
	/* What was waiting goes out now, from the sim's copies; the responder
	 * says when all of it has landed. Polling runs the progress engine. */
	struct ibv_wc wc;
	CHECK(ibv_poll_cq(s.cq, 1, &wc) >= 0);
	xsend("c", 1);
	xrecv(&c, 1);
	CHECK(c == 'y');
	CHECK(waitpid(responder, &st, 0) == responder && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	if (how != DESTROY)
		CHECK(ibv_destroy_qp(s.qp) == 0);
	if (how != DEREG)
		CHECK(ibv_dereg_mr(s.mr) == 0);
	if (moved)
		CHECK(munmap(moved, MSG) == 0);
	printf("requester: ");
}

static void responder(void)
{
	struct side s;
	open_side(&s, (size_t)NMSG * MSG);
	xsend("r", 1);
	char c;
	xrecv(&c, 1);
	CHECK(c == 'c');
	/* Verbs give a responder no completion for a WRITE: wait (bounded)
	 * for the last byte of each message, then check them all. */
	for (int m = 0; m < NMSG; m++) {
		volatile char *last = s.buf + (size_t)m * MSG + MSG - 1;
		for (int i = 0; *last != (char)PATTERN; i++) {
			CHECK(i < 20000);
			usleep(1000);
		}
	}
	for (size_t i = 0; i < (size_t)NMSG * MSG; i++)
		if (s.buf[i] != (char)PATTERN)
			CHECK(!"a WRITE landed with bytes that were not posted");
	printf("responder: %d checks passed\n", checks);
	fflush(stdout);
	xsend("y", 1);
	_exit(0);
}

int main(int argc, char **argv)
{
	int how = 0;
	CHECK(argc == 2);
	while (strcmp(argv[1], hows[how]))
		CHECK(++how < (int)(sizeof hows / sizeof *hows));
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	pid_t pid = fork();
	CHECK(pid >= 0);
	sock = pid == 0 ? sv[1] : sv[0];
	close(pid == 0 ? sv[0] : sv[1]);
	if (pid == 0) {
		/* A requester that fails while it holds the responder stopped
		 * must not leave it stopped for ever. */
		CHECK(prctl(PR_SET_PDEATHSIG, SIGKILL) == 0);
		responder();
	}
	requester(pid, how);
	DONE("sim_fabric_outbox");
}
