/* A 256-byte SEND into a 64-byte receive: what each end completes with,
 * and the QPs' states after. */
#include "probe.h"

int main(void)
{
	struct probe p;
	probe_open(&p);
	struct pair_opts o = { .timeout = 14, .retry_cnt = 7, .rnr_retry = 7, .rnr_timer = 1 };
	struct end a, b;
	pair_make(&p, &a, &b, &o);
	struct ibv_mr *src = mr_make(&p, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *rbuf = mr_make(&p, 4096, IBV_ACCESS_LOCAL_WRITE);
	NEED(post_recv(&b, rbuf, 64, 7) == 0);
	NEED(post_send(&a, IBV_WR_SEND, src, 256, 0, 0, 1) == 0);
	say("responder", next_status(b.rcq, 5000));
	say("requester", next_status(a.scq, 5000));
	say("requester_state", qp_state(a.qp));
	say("responder_state", qp_state(b.qp));
	int counts[32] = { 0 };
	drain_events(&p, 500, counts);
	say("events.qp_access_err", how_many(counts[IBV_EVENT_QP_ACCESS_ERR]));
	say("events.qp_req_err", how_many(counts[IBV_EVENT_QP_REQ_ERR]));
	say("events.qp_fatal", how_many(counts[IBV_EVENT_QP_FATAL]));
	end_destroy(&a);
	end_destroy(&b);
	mr_free(src);
	mr_free(rbuf);
	probe_close(&p);
	return 0;
}
