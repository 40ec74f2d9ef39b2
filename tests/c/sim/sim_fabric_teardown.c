/*
 * A responder takes its memory back while requests from another process
 * keep arriving. Once ibv_dereg_mr (or ibv_destroy_qp, then ibv_dereg_mr)
 * has returned, a device touches none of that memory: the program may
 * free or unmap it. Here the requester keeps RDMA WRITEs, SENDs or READs
 * of 256 KiB in flight to the responder, which, at a different moment
 * each round, takes its buffer back one way (`argv[1]`):
 *   write  deregisters the MR the WRITEs land in (its QP still RTS);
 *   recv   destroys the QP whose receives the SENDs land in, then
 *          deregisters their MR (qperf's server closes this way);
 *   read   deregisters the MR the READs read.
 * It then zeroes the buffer, checks that nothing lands in it for 20 ms,
 * and unmaps it: a sim that still copies into or out of it corrupts the
 * zeroes or dies of SIGSEGV. The requester sees its requests fail
 * (remote access error or retries exceeded) and starts the next round
 * with new QPs and MRs on both sides.
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
#include <time.h>
#include <unistd.h>

#include "../common/first_device.h"
#include "../common/rc_connect.h"
#include "check.h"
#include "sock_io.h"

#define MSG (256 * 1024)
#define SLOTS 8 /* messages in flight, and receives posted */
#define LEN ((size_t)SLOTS * MSG)
#define ROUNDS 24

enum how { WRITE, RECV, READ };
static const char *const hows[] = { "write", "recv", "read" };

struct addr {
	uint16_t lid;
	uint32_t qpn;
	uint64_t buf;
	uint32_t rkey;
};

struct side {
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char *buf;
};

static void sleep_us(long us)
{
	struct timespec t = { us / 1000000, (us % 1000000) * 1000 };
	nanosleep(&t, NULL);
}

/* A QP, CQ and a mapped, registered buffer on `ctx`'s PD, connected with
 * the peer's. */
static struct addr open_side(struct ibv_context *ctx, struct side *s, int access)
{
	s->cq = ibv_create_cq(ctx, 4 * SLOTS, NULL, NULL, 0);
	CHECK(s->cq);
	s->buf = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(s->buf != MAP_FAILED);
	memset(s->buf, 0x5c, LEN);
	s->mr = ibv_reg_mr(s->pd, s->buf, LEN, IBV_ACCESS_LOCAL_WRITE | access);
	CHECK(s->mr);
	struct ibv_qp_init_attr ia = {
		.send_cq = s->cq, .recv_cq = s->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = SLOTS, .max_recv_wr = SLOTS, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	s->qp = ibv_create_qp(s->pd, &ia);
	CHECK(s->qp);
	struct ibv_port_attr pa;
	CHECK(ibv_query_port(ctx, 1, &pa) == 0);
	struct addr me = { pa.lid, s->qp->qp_num, (uintptr_t)s->buf, s->mr->rkey }, peer;
	xsend(&me, sizeof me);
	xrecv(&peer, sizeof peer);
	rc_init(s->qp, access & ~IBV_ACCESS_LOCAL_WRITE);
	struct rc_path p = { .qpn = peer.qpn, .lid = peer.lid, .rd_atomic = 4, .rnr_timer = 1,
			     .timeout = 14, .retry_cnt = 7, .rnr_retry = 7 };
	rc_rtr_rts(s->qp, &p);
	return peer;
}

static void post(struct side *s, const struct addr *peer, enum how how, int slot)
{
	struct ibv_sge sge = { (uintptr_t)s->buf + (size_t)slot * MSG, MSG, s->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1,
				  .send_flags = IBV_SEND_SIGNALED },
			   *bad;
	wr.opcode = how == WRITE ? IBV_WR_RDMA_WRITE : how == READ ? IBV_WR_RDMA_READ : IBV_WR_SEND;
	wr.wr.rdma.remote_addr = peer->buf + (size_t)slot * MSG;
	wr.wr.rdma.rkey = peer->rkey;
	CHECK(ibv_post_send(s->qp, &wr, &bad) == 0);
}

/* Keeps SLOTS requests in flight until one fails, then drains the rest
 * (flushed). Returns how many succeeded. */
static long keep_busy(struct side *s, const struct addr *peer, enum how how)
{
	long ok = 0;
	int out = 0;
	for (int slot = 0; slot < SLOTS; slot++, out++)
		post(s, peer, how, slot);
	int failed = 0;
	for (long spins = 0; out > 0; spins++) {
		CHECK(spins < 100000000L);
		struct ibv_wc wc[SLOTS];
		int n = ibv_poll_cq(s->cq, SLOTS, wc);
		CHECK(n >= 0);
		for (int i = 0; i < n; i++) {
			out--;
			if (wc[i].status != IBV_WC_SUCCESS) {
				/* What a responder that took its memory back
				 * answers, then the flush of the rest. */
				CHECK(wc[i].status == IBV_WC_REM_ACCESS_ERR ||
				      wc[i].status == IBV_WC_RETRY_EXC_ERR ||
				      wc[i].status == IBV_WC_REM_OP_ERR ||
				      wc[i].status == IBV_WC_WR_FLUSH_ERR);
				failed = 1;
			} else if (!failed) {
				ok++;
				post(s, peer, how, (int)wc[i].wr_id);
				out++;
			}
		}
		if (!n)
			sleep_us(10);
	}
	return ok;
}

static void close_side(struct side *s)
{
	CHECK(ibv_destroy_qp(s->qp) == 0);
	CHECK(ibv_destroy_cq(s->cq) == 0);
	CHECK(ibv_dereg_mr(s->mr) == 0);
	CHECK(munmap(s->buf, LEN) == 0);
}

static void requester(struct ibv_context *ctx, struct ibv_pd *pd, enum how how)
{
	long total = 0;
	for (int round = 0; round < ROUNDS; round++) {
		struct side s = { .pd = pd };
		struct addr peer = open_side(ctx, &s, 0);
		char c;
		xrecv(&c, 1);
		CHECK(c == 'g');
		total += keep_busy(&s, &peer, how);
		close_side(&s);
		xsend("n", 1);
		xrecv(&c, 1);
		CHECK(c == 'e');
	}
	/* Every round moved data before the responder took its memory back. */
	CHECK(total >= ROUNDS);
	printf("requester: %ld requests completed over %d rounds\n", total, ROUNDS);
}

static void post_recvs(struct side *s)
{
	for (int slot = 0; slot < SLOTS; slot++) {
		struct ibv_sge sge = { (uintptr_t)s->buf + (size_t)slot * MSG, MSG, s->mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1 }, *bad;
		CHECK(ibv_post_recv(s->qp, &wr, &bad) == 0);
	}
}

/* Reposts the receives the SENDs completed, for `us` microseconds. */
static void serve(struct side *s, long us)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		struct ibv_wc wc[SLOTS];
		int n = ibv_poll_cq(s->cq, SLOTS, wc);
		CHECK(n >= 0);
		for (int i = 0; i < n; i++) {
			CHECK(wc[i].status == IBV_WC_SUCCESS);
			struct ibv_sge sge = { (uintptr_t)s->buf + wc[i].wr_id * MSG, MSG,
					       s->mr->lkey };
			struct ibv_recv_wr wr = { .wr_id = wc[i].wr_id, .sg_list = &sge,
						  .num_sge = 1 },
					   *bad;
			CHECK(ibv_post_recv(s->qp, &wr, &bad) == 0);
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000000L + (t.tv_nsec - t0.tv_nsec) / 1000 < us);
}

static void responder(enum how how)
{
	struct ibv_context *ctx = open_first();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	int access = how == WRITE ? IBV_ACCESS_REMOTE_WRITE : how == READ ? IBV_ACCESS_REMOTE_READ : 0;
	for (int round = 0; round < ROUNDS; round++) {
		struct side s = { .pd = pd };
		open_side(ctx, &s, access);
		if (how == RECV)
			post_recvs(&s);
		xsend("g", 1);
		/* A different moment of the traffic each round. */
		long us = 2000 + (round * 1237) % 9000;
		if (how == RECV) {
			serve(&s, us);
			CHECK(ibv_destroy_qp(s.qp) == 0);
		} else {
			sleep_us(us);
		}
		CHECK(ibv_dereg_mr(s.mr) == 0);
		memset(s.buf, 0, LEN);
		sleep_us(20000);
		for (size_t i = 0; i < LEN; i++)
			if (s.buf[i])
				CHECK(!"the sim wrote into memory after ibv_dereg_mr returned");
		CHECK(munmap(s.buf, LEN) == 0);
		sleep_us(5000);
		char c;
		xrecv(&c, 1);
		CHECK(c == 'n');
		if (how != RECV)
			CHECK(ibv_destroy_qp(s.qp) == 0);
		CHECK(ibv_destroy_cq(s.cq) == 0);
		xsend("e", 1);
	}
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	printf("responder: %d checks passed\n", checks);
	fflush(stdout);
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
		CHECK(prctl(PR_SET_PDEATHSIG, SIGKILL) == 0);
		responder(how);
	}
	struct ibv_context *ctx = open_first();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	requester(ctx, pd, how);
	int st;
	CHECK(waitpid(pid, &st, 0) == pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "responder: %s %d\n", WIFSIGNALED(st) ? "killed by signal" : "exit",
			WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
		CHECK(!"the responder failed");
	}
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	DONE("sim_fabric_teardown");
}
