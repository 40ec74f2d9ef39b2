/* Receiver not ready: the responder's min_rnr_timer is 31 (491.52 ms in
 * the IB spec's RNR timer table) and the requester's rnr_retry bounds the
 * retries. With no receive ever posted and rnr_retry 3, the SEND fails
 * after its 3 retries; with rnr_retry 6 and the receive posted 50 ms
 * late, the first retry lands. Times are bucketed (probe.h's bucket_ms,
 * bucket_wide_ms). */
#include "probe.h"

int main(void)
{
	struct probe p;
	probe_open(&p);
	struct ibv_mr *src = mr_make(&p, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *rbuf = mr_make(&p, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_wc wc;

	struct pair_opts o = { .timeout = 14, .retry_cnt = 7, .rnr_retry = 3, .rnr_timer = 31 };
	struct end a, b;
	pair_make(&p, &a, &b, &o);
	long long t0 = now_ms();
	NEED(post_send(&a, IBV_WR_SEND, src, 32, 0, 0, 1) == 0);
	if (poll_one(a.scq, 20000, &wc)) {
		say("no_recv.requester", wc_name(wc.status));
		say("no_recv.after_ms", bucket_ms(now_ms() - t0));
	} else {
		say("no_recv.requester", "none");
	}
	say("no_recv.requester_state", qp_state(a.qp));
	end_destroy(&a);
	end_destroy(&b);

	o.rnr_retry = 6;
	pair_make(&p, &a, &b, &o);
	t0 = now_ms();
	NEED(post_send(&a, IBV_WR_SEND, src, 32, 0, 0, 1) == 0);
	sleep_ms(50);
	NEED(post_recv(&b, rbuf, 4096, 2) == 0);
	if (poll_one(a.scq, 20000, &wc)) {
		say("late_recv.requester", wc_name(wc.status));
		/* About one RNR timer (491 ms): a loaded machine may stretch
		 * it past 1250 ms, so only "it waited for the retry" counts. */
		say("late_recv.after_ms", bucket_wide_ms(now_ms() - t0));
	} else {
		say("late_recv.requester", "none");
	}
	say("late_recv.responder", next_status(b.rcq, 2000));
	end_destroy(&a);
	end_destroy(&b);

	mr_free(src);
	mr_free(rbuf);
	probe_close(&p);
	return 0;
}
