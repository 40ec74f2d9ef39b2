/* Memory windows between two processes on the sim fabric: the responder
 * (child) binds windows on its QP; the requester (parent) reaches its
 * memory through their rkeys, and the responder's progress engine checks
 * them (range, access, invalidation by IBV_WR_LOCAL_INV and by a received
 * IBV_WR_SEND_WITH_INV) and answers with the statuses hardware gives; a
 * request it refuses moves its QP to ERR (a class C error), so both ends
 * connect again before the next. The process forks before any verbs
 * call; the halves talk over a socketpair. */
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rc_pair.h"

#define ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
		IBV_ACCESS_MW_BIND)

struct addr {
	uint32_t qpn, rkey1, rkey2;
	uint16_t lid;
	uint64_t buf;
};

static int sock;

static void say(const void *p, size_t n)
{
	CHECK(write(sock, p, n) == (ssize_t)n);
}

static void hear(void *p, size_t n)
{
	CHECK(read(sock, p, n) == (ssize_t)n);
}

/* Connects s to the QP `qpn` at `lid` of the other process. */
static void connect_to(struct side *s, uint32_t qpn, uint16_t lid)
{
	struct ibv_qp remote = { .qp_num = qpn };
	struct side peer = { .qp = &remote, .lid = lid };
	connect_rc(s, &peer);
}

static struct side me;
static struct addr far;

/* The responder's side of "connect again": told 'r', its QP (in ERR after
 * the refusal) goes back to RTS, and it says 'k'. Returns the next
 * command that is not 'r'. */
static char reconnect_while_asked(void)
{
	char cmd;
	for (hear(&cmd, 1); cmd == 'r'; hear(&cmd, 1)) {
		CHECK(me.qp->state == IBV_QPS_ERR);
		connect_to(&me, far.qpn, far.lid);
		say("k", 1);
	}
	return cmd;
}

/* The requester's side: after a refused request, both ends again. */
static void again(void)
{
	connect_to(&me, far.qpn, far.lid);
	say("r", 1);
	char ok;
	hear(&ok, 1);
	CHECK(ok == 'k');
}

static void responder(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	CHECK(list && list[0]);
	setup(&me, list[0], ACCESS);
	struct ibv_mw *mw1 = ibv_alloc_mw(me.pd, IBV_MW_TYPE_1);
	struct ibv_mw *mw2 = ibv_alloc_mw(me.pd, IBV_MW_TYPE_2);
	CHECK(mw1 && mw2);
	struct addr mine = { .qpn = me.qp->qp_num, .lid = me.lid, .buf = (uintptr_t)me.buf };
	say(&mine, sizeof(mine));
	hear(&far, sizeof(far));
	connect_to(&me, far.qpn, far.lid);

	/* Type 1 over buf[64..128), type 2 over buf[128..136) read only. */
	struct ibv_mw_bind mb = { .wr_id = 1, .send_flags = IBV_SEND_SIGNALED,
				  .bind_info = { .mr = me.mr, .addr = (uintptr_t)&me.buf[64],
						 .length = 64 * 8,
						 .mw_access_flags = IBV_ACCESS_REMOTE_WRITE |
								    IBV_ACCESS_REMOTE_READ } };
	CHECK(ibv_bind_mw(me.qp, mw1, &mb) == 0);
	CHECK(poll_one(me.cq).status == IBV_WC_SUCCESS);
	uint32_t k2 = ibv_inc_rkey(mw2->rkey);
	struct ibv_send_wr wr = { .wr_id = 2, .opcode = IBV_WR_BIND_MW,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	wr.bind_mw.mw = mw2;
	wr.bind_mw.rkey = k2;
	wr.bind_mw.bind_info = (struct ibv_mw_bind_info){ .mr = me.mr,
							   .addr = (uintptr_t)&me.buf[128],
							   .length = 8,
							   .mw_access_flags = IBV_ACCESS_REMOTE_READ };
	CHECK(ibv_post_send(me.qp, &wr, &bad) == 0);
	CHECK(poll_one(me.cq).status == IBV_WC_SUCCESS);
	me.buf[128] = 0x1122334455667788ull;
	mine.rkey1 = mw1->rkey;
	mine.rkey2 = k2;
	say(&mine, sizeof(mine));

	/* Asked to: invalidate k2 locally, then bind it again (k3) and wait
	 * for the requester's SEND_WITH_INV to invalidate that. */
	char cmd = reconnect_while_asked();
	CHECK(cmd == 'x');
	struct ibv_send_wr inv = { .wr_id = 3, .opcode = IBV_WR_LOCAL_INV,
				   .send_flags = IBV_SEND_SIGNALED };
	inv.invalidate_rkey = k2;
	CHECK(ibv_post_send(me.qp, &inv, &bad) == 0);
	CHECK(poll_one(me.cq).status == IBV_WC_SUCCESS);
	uint32_t k3 = ibv_inc_rkey(k2);
	wr.bind_mw.rkey = k3;
	CHECK(ibv_post_send(me.qp, &wr, &bad) == 0);
	CHECK(poll_one(me.cq).status == IBV_WC_SUCCESS);
	say(&k3, sizeof(k3));
	/* The requester's read through the invalidated k2 is refused first. */
	CHECK(reconnect_while_asked() == 'p');
	post_recv(&me, 9, &me.buf[300], 64);
	say("k", 1);
	struct ibv_wc wc = poll_one(me.cq);
	CHECK(wc.wr_id == 9 && wc.status == IBV_WC_SUCCESS && (wc.wc_flags & IBV_WC_WITH_INV));
	CHECK(wc.invalidated_rkey == k3);
	say("i", 1);
	hear(&cmd, 1);
	CHECK(cmd == 'q');
	printf("responder: %d checks passed\n", checks);
	exit(0);
}

int main(void)
{
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	fflush(stdout);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		sock = sv[1];
		responder();
	}
	sock = sv[0];
	struct ibv_device **list = ibv_get_device_list(NULL);
	CHECK(list && list[0]);
	setup(&me, list[0], IBV_ACCESS_LOCAL_WRITE);
	struct addr mine = { .qpn = me.qp->qp_num, .lid = me.lid };
	hear(&far, sizeof(far));
	say(&mine, sizeof(mine));
	connect_to(&me, far.qpn, far.lid);
	hear(&far, sizeof(far));
	uint64_t at = far.buf + 64 * 8;

	/* Through the type 1 window: inside it, then past its end. */
	me.buf[0] = 42;
	CHECK(rdma(&me, IBV_WR_RDMA_WRITE, me.buf, 8, at, far.rkey1) == IBV_WC_SUCCESS);
	CHECK(rdma(&me, IBV_WR_RDMA_READ, &me.buf[1], 8, at, far.rkey1) == IBV_WC_SUCCESS);
	CHECK(me.buf[1] == 42);
	CHECK(rdma(&me, IBV_WR_RDMA_WRITE, me.buf, 16, at + 63 * 8, far.rkey1) ==
	      IBV_WC_REM_ACCESS_ERR);
	again();
	/* Type 2: read only. */
	uint64_t at2 = far.buf + 128 * 8;
	CHECK(rdma(&me, IBV_WR_RDMA_READ, &me.buf[2], 8, at2, far.rkey2) == IBV_WC_SUCCESS);
	CHECK(me.buf[2] == 0x1122334455667788ull);
	CHECK(rdma(&me, IBV_WR_RDMA_WRITE, me.buf, 8, at2, far.rkey2) == IBV_WC_REM_ACCESS_ERR);
	again();

	/* Invalidated by the responder: gone. */
	say("x", 1);
	uint32_t k3;
	hear(&k3, sizeof(k3));
	CHECK(rdma(&me, IBV_WR_RDMA_READ, &me.buf[2], 8, at2, far.rkey2) == IBV_WC_REM_ACCESS_ERR);
	again();
	/* Its receive for the SEND_WITH_INV posted. */
	say("p", 1);
	char posted;
	hear(&posted, 1);
	CHECK(posted == 'k');
	/* Bound again as k3; our SEND_WITH_INV invalidates it over there. */
	CHECK(rdma(&me, IBV_WR_RDMA_READ, &me.buf[2], 8, at2, k3) == IBV_WC_SUCCESS);
	CHECK(rdma(&me, IBV_WR_SEND_WITH_INV, me.buf, 8, 0, k3) == IBV_WC_SUCCESS);
	char ok;
	hear(&ok, 1);
	CHECK(rdma(&me, IBV_WR_RDMA_READ, &me.buf[2], 8, at2, k3) == IBV_WC_REM_ACCESS_ERR);
	say("q", 1);
	int st;
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	DONE("obj_mw_remote");
}
