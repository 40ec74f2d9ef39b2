/* RDMA WRITE refused by the responder's access checks (class C errors on
 * the responder): to an MR registered without remote write, and on a QP
 * that grants no remote access. The requester's completion, and what
 * becomes of the responder: its state, the receive it had posted, and
 * the QP async events raised. */
#include "probe.h"

static void one(struct probe *p, const char *name, int qp_access, int mr_access)
{
	char key[96];
	struct pair_opts o = { .access_a = qp_access, .access_b = qp_access,
			       .timeout = 14, .retry_cnt = 7, .rnr_retry = 7, .rnr_timer = 1 };
	struct end a, b;
	pair_make(p, &a, &b, &o);
	struct ibv_mr *src = mr_make(p, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *dst = mr_make(p, 4096, mr_access);
	struct ibv_mr *rbuf = mr_make(p, 4096, IBV_ACCESS_LOCAL_WRITE);
	NEED(post_recv(&b, rbuf, 4096, 7) == 0);
	NEED(post_send(&a, IBV_WR_RDMA_WRITE, src, 64, (uintptr_t)dst->addr, dst->rkey, 1) == 0);
	snprintf(key, sizeof(key), "%s.requester", name);
	say(key, next_status(a.scq, 5000));
	snprintf(key, sizeof(key), "%s.requester_state", name);
	say(key, qp_state(a.qp));
	snprintf(key, sizeof(key), "%s.responder_recv", name);
	say(key, next_status(b.rcq, 1000));
	snprintf(key, sizeof(key), "%s.responder_state", name);
	say(key, qp_state(b.qp));
	int counts[32] = { 0 };
	drain_events(p, 500, counts);
	snprintf(key, sizeof(key), "%s.events.qp_access_err", name);
	say(key, how_many(counts[IBV_EVENT_QP_ACCESS_ERR]));
	snprintf(key, sizeof(key), "%s.events.qp_req_err", name);
	say(key, how_many(counts[IBV_EVENT_QP_REQ_ERR]));
	snprintf(key, sizeof(key), "%s.events.qp_fatal", name);
	say(key, how_many(counts[IBV_EVENT_QP_FATAL]));
	end_destroy(&a);
	end_destroy(&b);
	mr_free(src);
	mr_free(dst);
	mr_free(rbuf);
}

int main(void)
{
	struct probe p;
	probe_open(&p);
	one(&p, "mr_without_remote_write", IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
	    IBV_ACCESS_LOCAL_WRITE);
	one(&p, "qp_access_0", 0, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	probe_close(&p);
	return 0;
}
