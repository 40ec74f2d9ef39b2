/* Transport retries across processes: the responder QP's process has
 * died (its QPs destroyed with it). The requester's SEND completes
 * RETRY_EXC_ERR once its retry_cnt retries of the local ACK timeout
 * (timeout 17: 537 ms; 3 retries, about 2.1 s) have run out. Before,
 * while it lived, a SEND to it succeeds. */
#include <sys/wait.h>

#include "probe.h"

int main(void)
{
	int c2p[2], p2c[2];
	NEED(pipe(c2p) == 0 && pipe(p2c) == 0);
	struct pair_opts o = { .timeout = 17, .retry_cnt = 3, .rnr_retry = 7, .rnr_timer = 1 };
	pid_t child = fork();
	NEED(child >= 0);
	if (child == 0) {
		struct probe p;
		probe_open(&p);
		struct end b;
		end_make(&p, &b, &o, 0);
		uint32_t mine = b.qp->qp_num, theirs;
		NEED(write(c2p[1], &mine, 4) == 4);
		NEED(read(p2c[0], &theirs, 4) == 4);
		end_init(&b, 0);
		end_rtr(&p, &b, theirs, &o);
		end_rts(&b, &o);
		struct ibv_mr *rbuf = mr_make(&p, 4096, IBV_ACCESS_LOCAL_WRITE);
		NEED(post_recv(&b, rbuf, 4096, 1) == 0);
		NEED(write(c2p[1], "r", 1) == 1);
		char c;
		(void)!read(p2c[0], &c, 1);
		_exit(0);
	}
	struct probe p;
	probe_open(&p);
	struct ibv_mr *src = mr_make(&p, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct end a;
	end_make(&p, &a, &o, 0);
	uint32_t mine = a.qp->qp_num, theirs;
	NEED(read(c2p[0], &theirs, 4) == 4);
	NEED(write(p2c[1], &mine, 4) == 4);
	end_init(&a, 0);
	end_rtr(&p, &a, theirs, &o);
	end_rts(&a, &o);
	char c;
	NEED(read(c2p[0], &c, 1) == 1);
	struct ibv_wc wc;
	NEED(post_send(&a, IBV_WR_SEND, src, 32, 0, 0, 1) == 0);
	say("live_peer.requester", poll_one(a.scq, 20000, &wc) ? wc_name(wc.status) : "none");
	NEED(write(p2c[1], "q", 1) == 1);
	int status;
	NEED(waitpid(child, &status, 0) == child);
	long long t0 = now_ms();
	NEED(post_send(&a, IBV_WR_SEND, src, 32, 0, 0, 2) == 0);
	if (poll_one(a.scq, 30000, &wc)) {
		say("dead_peer.requester", wc_name(wc.status));
		say("dead_peer.after_ms", bucket_ms(now_ms() - t0));
	} else {
		say("dead_peer.requester", "none");
	}
	say("dead_peer.requester_state", qp_state(a.qp));
	end_destroy(&a);
	mr_free(src);
	probe_close(&p);
	return 0;
}
