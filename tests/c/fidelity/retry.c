/* Transport retries: an RC QP whose peer never answers (a QP number no QP
 * holds; a QP of ours still in INIT) completes RETRY_EXC_ERR once its
 * retry_cnt retries of the local ACK timeout (4.096 us x 2^timeout; 17:
 * 537 ms) have run out: 3 retries, about 2.1 s. */
#include "probe.h"

int main(void)
{
	struct probe p;
	probe_open(&p);
	struct pair_opts o = { .timeout = 17, .retry_cnt = 3, .rnr_retry = 7, .rnr_timer = 1 };
	struct end a;
	end_make(&p, &a, &o, 0);
	end_init(&a, 0);
	end_rtr(&p, &a, 0xfffff0, &o);
	end_rts(&a, &o);
	struct ibv_mr *src = mr_make(&p, 4096, IBV_ACCESS_LOCAL_WRITE);
	long long t0 = now_ms();
	NEED(post_send(&a, IBV_WR_SEND, src, 32, 0, 0, 1) == 0);
	struct ibv_wc wc;
	if (poll_one(a.scq, 30000, &wc)) {
		say("no_peer.requester", wc_name(wc.status));
		say("no_peer.after_ms", bucket_ms(now_ms() - t0));
	} else {
		say("no_peer.requester", "none");
	}
	say("no_peer.requester_state", qp_state(a.qp));
	end_destroy(&a);

	struct end b;
	end_make(&p, &a, &o, 0);
	end_make(&p, &b, &o, 0);
	end_init(&b, 0);
	end_init(&a, 0);
	end_rtr(&p, &a, b.qp->qp_num, &o);
	end_rts(&a, &o);
	t0 = now_ms();
	NEED(post_send(&a, IBV_WR_SEND, src, 32, 0, 0, 2) == 0);
	if (poll_one(a.scq, 30000, &wc)) {
		say("peer_in_init.requester", wc_name(wc.status));
		say("peer_in_init.after_ms", bucket_ms(now_ms() - t0));
	} else {
		say("peer_in_init.requester", "none");
	}
	say("peer_in_init.responder_state", qp_state(b.qp));
	end_destroy(&a);
	end_destroy(&b);
	mr_free(src);
	probe_close(&p);
	return 0;
}
