/* Receiver not ready on a responder whose receives come from an SRQ: as
 * rnr.c, the responder's min_rnr_timer 31 (491.52 ms) and the requester's
 * rnr_retry bound the wait. No receive ever posted to the SRQ and
 * rnr_retry 3: the SEND fails after its retries; rnr_retry 6 and the
 * receive posted to the SRQ 50 ms late: the first retry lands. */
#include "probe.h"

/* `e` as end_make, its receives from `srq`. */
static void end_make_srq(struct probe *p, struct end *e, struct ibv_srq *srq)
{
	e->scq = ibv_create_cq(p->ctx, 64, NULL, NULL, 0);
	e->rcq = ibv_create_cq(p->ctx, 64, NULL, NULL, 0);
	NEED(e->scq && e->rcq);
	struct ibv_qp_init_attr ia;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = e->scq;
	ia.recv_cq = e->rcq;
	ia.srq = srq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 16;
	ia.cap.max_send_sge = 1;
	e->qp = ibv_create_qp(p->pd, &ia);
	NEED(e->qp);
}

static void connect(struct probe *p, struct end *a, struct end *b, const struct pair_opts *o)
{
	end_init(a, 0);
	end_init(b, 0);
	end_rtr(p, a, b->qp->qp_num, o);
	end_rtr(p, b, a->qp->qp_num, o);
	end_rts(a, o);
	end_rts(b, o);
}

int main(void)
{
	struct probe p;
	probe_open(&p);
	struct ibv_mr *src = mr_make(&p, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *rbuf = mr_make(&p, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_srq_init_attr sa;
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 16;
	sa.attr.max_sge = 1;
	struct ibv_wc wc;

	struct pair_opts o = { .timeout = 14, .retry_cnt = 7, .rnr_retry = 3, .rnr_timer = 31 };
	struct end a, b;
	struct ibv_srq *srq = ibv_create_srq(p.pd, &sa);
	NEED(srq);
	end_make(&p, &a, &o, 0);
	end_make_srq(&p, &b, srq);
	connect(&p, &a, &b, &o);
	long long t0 = now_ms();
	NEED(post_send(&a, IBV_WR_SEND, src, 32, 0, 0, 1) == 0);
	if (poll_one(a.scq, 20000, &wc)) {
		say("srq_no_recv.requester", wc_name(wc.status));
		say("srq_no_recv.after_ms", bucket_ms(now_ms() - t0));
	} else {
		say("srq_no_recv.requester", "none");
	}
	say("srq_no_recv.requester_state", qp_state(a.qp));
	end_destroy(&a);
	end_destroy(&b);
	NEED(ibv_destroy_srq(srq) == 0);

	o.rnr_retry = 6;
	srq = ibv_create_srq(p.pd, &sa);
	NEED(srq);
	end_make(&p, &a, &o, 0);
	end_make_srq(&p, &b, srq);
	connect(&p, &a, &b, &o);
	t0 = now_ms();
	NEED(post_send(&a, IBV_WR_SEND, src, 32, 0, 0, 1) == 0);
	sleep_ms(50);
	struct ibv_sge sge = { .addr = (uintptr_t)rbuf->addr, .length = 4096, .lkey = rbuf->lkey };
	struct ibv_recv_wr rw = { .wr_id = 2, .sg_list = &sge, .num_sge = 1 }, *bad;
	NEED(ibv_post_srq_recv(srq, &rw, &bad) == 0);
	if (poll_one(a.scq, 20000, &wc)) {
		say("srq_late_recv.requester", wc_name(wc.status));
		say("srq_late_recv.after_ms", bucket_wide_ms(now_ms() - t0));
	} else {
		say("srq_late_recv.requester", "none");
	}
	say("srq_late_recv.responder", next_status(b.rcq, 2000));
	end_destroy(&a);
	end_destroy(&b);
	NEED(ibv_destroy_srq(srq) == 0);

	mr_free(src);
	mr_free(rbuf);
	probe_close(&p);
	return 0;
}
