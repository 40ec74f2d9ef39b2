/* Receiver not ready across processes: as rnr.c, with the responder's QPs
 * in a child process. The responder's min_rnr_timer is 31 (491.52 ms);
 * with no receive and the requester's rnr_retry 3 the SEND fails after its
 * retries, with rnr_retry 6 and the receive posted 50 ms late it lands. */
#include <sys/wait.h>

#include "probe.h"

static int c2p[2], p2c[2];

static void put(const void *b, size_t n, int fd)
{
	NEED(write(fd, b, n) == (ssize_t)n);
}

static void get(void *b, size_t n, int fd)
{
	NEED(read(fd, b, n) == (ssize_t)n);
}

static void connect_to(struct probe *p, struct end *e, uint32_t dest, const struct pair_opts *o)
{
	end_init(e, 0);
	end_rtr(p, e, dest, o);
	end_rts(e, o);
}

static int responder(void)
{
	struct probe p;
	probe_open(&p);
	struct pair_opts o = { .timeout = 14, .retry_cnt = 7, .rnr_retry = 7, .rnr_timer = 31 };
	struct end b1, b2;
	end_make(&p, &b1, &o, 0);
	end_make(&p, &b2, &o, 0);
	uint32_t mine[2] = { b1.qp->qp_num, b2.qp->qp_num }, theirs[2];
	put(mine, sizeof(mine), c2p[1]);
	get(theirs, sizeof(theirs), p2c[0]);
	connect_to(&p, &b1, theirs[0], &o);
	connect_to(&p, &b2, theirs[1], &o);
	put("r", 1, c2p[1]);
	char c;
	get(&c, 1, p2c[0]);
	sleep_ms(50);
	struct ibv_mr *rbuf = mr_make(&p, 4096, IBV_ACCESS_LOCAL_WRITE);
	NEED(post_recv(&b2, rbuf, 4096, 2) == 0);
	struct ibv_wc wc;
	char st = poll_one(b2.rcq, 20000, &wc) ? (char)wc.status : -1;
	put(&st, 1, c2p[1]);
	get(&c, 1, p2c[0]);
	end_destroy(&b1);
	end_destroy(&b2);
	mr_free(rbuf);
	probe_close(&p);
	return 0;
}

int main(void)
{
	NEED(pipe(c2p) == 0 && pipe(p2c) == 0);
	pid_t child = fork();
	NEED(child >= 0);
	if (child == 0)
		_exit(responder());

	struct probe p;
	probe_open(&p);
	struct ibv_mr *src = mr_make(&p, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct pair_opts o1 = { .timeout = 14, .retry_cnt = 7, .rnr_retry = 3, .rnr_timer = 31 };
	struct pair_opts o2 = o1;
	o2.rnr_retry = 6;
	struct end a1, a2;
	end_make(&p, &a1, &o1, 0);
	end_make(&p, &a2, &o2, 0);
	uint32_t mine[2] = { a1.qp->qp_num, a2.qp->qp_num }, theirs[2];
	get(theirs, sizeof(theirs), c2p[0]);
	put(mine, sizeof(mine), p2c[1]);
	connect_to(&p, &a1, theirs[0], &o1);
	connect_to(&p, &a2, theirs[1], &o2);
	char c;
	get(&c, 1, c2p[0]);
	struct ibv_wc wc;

	long long t0 = now_ms();
	NEED(post_send(&a1, IBV_WR_SEND, src, 32, 0, 0, 1) == 0);
	if (poll_one(a1.scq, 20000, &wc)) {
		say("remote_no_recv.requester", wc_name(wc.status));
		say("remote_no_recv.after_ms", bucket_ms(now_ms() - t0));
	} else {
		say("remote_no_recv.requester", "none");
	}
	say("remote_no_recv.requester_state", qp_state(a1.qp));

	t0 = now_ms();
	NEED(post_send(&a2, IBV_WR_SEND, src, 32, 0, 0, 2) == 0);
	put("g", 1, p2c[1]);
	if (poll_one(a2.scq, 20000, &wc)) {
		say("remote_late_recv.requester", wc_name(wc.status));
		say("remote_late_recv.after_ms", bucket_wide_ms(now_ms() - t0));
	} else {
		say("remote_late_recv.requester", "none");
	}
	char st;
	get(&st, 1, c2p[0]);
	say("remote_late_recv.responder", st < 0 ? "none" : wc_name((enum ibv_wc_status)st));
	put("q", 1, p2c[1]);
	int status;
	NEED(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	end_destroy(&a1);
	end_destroy(&a2);
	mr_free(src);
	probe_close(&p);
	return 0;
}
