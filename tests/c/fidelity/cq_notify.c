/* A CQ armed for any completion, then again for solicited ones only: an
 * unsolicited completion still raises the event. */
#include <poll.h>

#include "probe.h"

int main(void)
{
	struct probe p;
	probe_open(&p);
	struct pair_opts o = { .timeout = 14, .retry_cnt = 7, .rnr_retry = 7, .rnr_timer = 1 };
	struct end a, b;
	pair_make(&p, &a, &b, &o);
	struct ibv_comp_channel *ch = ibv_create_comp_channel(p.ctx);
	NEED(ch);
	struct ibv_cq *cq = ibv_create_cq(p.ctx, 16, NULL, ch, 0);
	NEED(cq);
	struct ibv_qp_init_attr ia;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = b.scq;
	ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	/* The responder's receives complete on the channel's CQ. */
	struct ibv_qp *r = ibv_create_qp(p.pd, &ia);
	NEED(r);
	struct end rr = { .qp = r, .scq = b.scq, .rcq = cq };
	end_init(&rr, 0);
	end_rtr(&p, &rr, a.qp->qp_num, &o);
	end_rts(&rr, &o);
	/* Point the requester at the new responder. */
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_RESET };
	NEED(ibv_modify_qp(a.qp, &at, IBV_QP_STATE) == 0);
	end_init(&a, 0);
	end_rtr(&p, &a, r->qp_num, &o);
	end_rts(&a, &o);

	struct ibv_mr *src = mr_make(&p, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *rbuf = mr_make(&p, 4096, IBV_ACCESS_LOCAL_WRITE);
	NEED(post_recv(&rr, rbuf, 4096, 1) == 0);
	NEED(ibv_req_notify_cq(cq, 0) == 0);
	NEED(ibv_req_notify_cq(cq, 1) == 0);
	NEED(post_send(&a, IBV_WR_SEND, src, 32, 0, 0, 1) == 0);
	say("send", next_status(a.scq, 5000));
	struct pollfd pf = { .fd = ch->fd, .events = POLLIN };
	int n = poll(&pf, 1, 2000);
	say("event_after_any_then_solicited", n == 1 ? "yes" : "no");
	if (n == 1) {
		struct ibv_cq *ecq;
		void *ectx;
		NEED(ibv_get_cq_event(ch, &ecq, &ectx) == 0);
		ibv_ack_cq_events(ecq, 1);
	}
	say("recv", next_status(cq, 2000));
	NEED(ibv_destroy_qp(r) == 0);
	end_destroy(&a);
	end_destroy(&b);
	NEED(ibv_destroy_cq(cq) == 0);
	NEED(ibv_destroy_comp_channel(ch) == 0);
	mr_free(src);
	mr_free(rbuf);
	probe_close(&p);
	return 0;
}
