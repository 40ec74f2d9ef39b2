/* A responder's receive CQ of 7 entries and 16 SENDs it completes, none
 * polled: the CQ overflows. The CQ's size as created, the CQ_ERR events
 * the overflow raises, and the responder QP's state after. */
#include "probe.h"

int main(void)
{
	struct probe p;
	probe_open(&p);
	struct pair_opts o = { .recv_cqe_b = 7, .send_wr = 16, .recv_wr = 16, .timeout = 10,
			       .retry_cnt = 1, .rnr_retry = 1, .rnr_timer = 1 };
	struct end a, b;
	pair_make(&p, &a, &b, &o);
	say_int("cq_cqe", b.rcq->cqe);
	struct ibv_mr *src = mr_make(&p, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *rbuf = mr_make(&p, 16 * 64, IBV_ACCESS_LOCAL_WRITE);
	for (int i = 0; i < 16; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)rbuf->addr + 64 * i, .length = 64,
				       .lkey = rbuf->lkey };
		struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;
		NEED(ibv_post_recv(b.qp, &wr, &bad) == 0);
	}
	for (int i = 0; i < 16; i++)
		NEED(post_send(&a, IBV_WR_SEND, src, 32, 0, 0, i) == 0);
	/* The requester's completions: all 16 come (successes, or errors
	 * once the responder stopped answering). */
	int sent = 0, failed = 0;
	const char *first_error = "none";
	struct ibv_wc wc;
	while (sent < 16 && poll_one(a.scq, 5000, &wc)) {
		sent++;
		if (wc.status != IBV_WC_SUCCESS && !failed++)
			first_error = wc_name(wc.status);
	}
	say_int("requester_completions", sent);
	say("requester_first_error", first_error);
	int counts[32] = { 0 };
	drain_events(&p, 1000, counts);
	say("cq_err_events", how_many(counts[IBV_EVENT_CQ_ERR]));
	say("responder_state", qp_state(b.qp));
	end_destroy(&a);
	end_destroy(&b);
	mr_free(src);
	mr_free(rbuf);
	probe_close(&p);
	return 0;
}
