/* Queue depths: what a QP created with max_send_wr = max_recv_wr = 8 (one
 * SGE, no inline data) reports, how many receives it takes, and how many
 * SENDs it takes while they cannot complete (the responder has no receive
 * and rnr_retry is 7: the first SEND retries forever); the CQ sizes a
 * request of 1 and 8 entries gets. */
#include "probe.h"

int main(void)
{
	struct probe p;
	probe_open(&p);
	struct pair_opts o = { .send_wr = 8, .recv_wr = 8, .timeout = 14, .retry_cnt = 7,
			       .rnr_retry = 7, .rnr_timer = 1 };
	struct end a, b;
	end_make(&p, &a, &o, 0);
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	NEED(ibv_query_qp(a.qp, &qa, IBV_QP_CAP, &qi) == 0);
	say_int("send_cap", qa.cap.max_send_wr);
	say_int("recv_cap", qa.cap.max_recv_wr);
	say_int("send_sge_cap", qa.cap.max_send_sge);
	say_int("inline_cap", qa.cap.max_inline_data);
	NEED(ibv_destroy_qp(a.qp) == 0);
	NEED(ibv_destroy_cq(a.scq) == 0);
	NEED(ibv_destroy_cq(a.rcq) == 0);

	pair_make(&p, &a, &b, &o);
	struct ibv_mr *src = mr_make(&p, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *rbuf = mr_make(&p, 4096, IBV_ACCESS_LOCAL_WRITE);
	int n, rc = 0;
	for (n = 0; n < 100; n++)
		if ((rc = post_recv(&a, rbuf, 64, n)) != 0)
			break;
	say_int("recv_accepted", n);
	say("recv_refused", errno_name(rc));
	for (n = 0; n < 100; n++)
		if ((rc = post_send(&a, IBV_WR_SEND, src, 32, 0, 0, n)) != 0)
			break;
	say_int("send_accepted", n);
	say("send_refused", errno_name(rc));
	end_destroy(&a);
	end_destroy(&b);
	mr_free(src);
	mr_free(rbuf);

	struct ibv_cq *cq = ibv_create_cq(p.ctx, 1, NULL, NULL, 0);
	NEED(cq);
	say_int("cq_cqe_for_1", cq->cqe);
	NEED(ibv_destroy_cq(cq) == 0);
	cq = ibv_create_cq(p.ctx, 8, NULL, NULL, 0);
	NEED(cq);
	say_int("cq_cqe_for_8", cq->cqe);
	NEED(ibv_destroy_cq(cq) == 0);
	probe_close(&p);
	return 0;
}
