/* The QP async events of the transport's paths: a receive completed on a
 * QP still in RTR (the spec's communication-established event), a
 * requester's local protection error (class B on the requester), and an
 * RDMA READ past the end of the responder's MR (class C on the
 * responder). Each prints both ends' completions and states and the
 * async events raised, by type and by which QP they name. */
#include "probe.h"

struct seen {
	int on_a[32], on_b[32], other;
};

static void events(struct probe *p, struct end *a, struct end *b, struct seen *s)
{
	memset(s, 0, sizeof(*s));
	int fl = fcntl(p->ctx->async_fd, F_GETFL);
	NEED(fl >= 0 && fcntl(p->ctx->async_fd, F_SETFL, fl | O_NONBLOCK) == 0);
	long long end = now_ms() + 500;
	for (;;) {
		struct ibv_async_event ev;
		if (ibv_get_async_event(p->ctx, &ev) == 0) {
			unsigned t = (unsigned)ev.event_type;
			int qp_event = t <= IBV_EVENT_PATH_MIG_ERR || t == IBV_EVENT_QP_LAST_WQE_REACHED;
			if (t < 32 && qp_event && ev.element.qp == a->qp)
				s->on_a[t]++;
			else if (t < 32 && qp_event && ev.element.qp == b->qp)
				s->on_b[t]++;
			else
				s->other++;
			ibv_ack_async_event(&ev);
			continue;
		}
		if (now_ms() >= end)
			break;
		sleep_ms(5);
	}
	NEED(fcntl(p->ctx->async_fd, F_SETFL, fl) == 0);
}

static void report(const char *name, const char *who, const int *c)
{
	static const struct { int type; const char *key; } kinds[] = {
		{ IBV_EVENT_COMM_EST, "comm_est" },
		{ IBV_EVENT_QP_FATAL, "qp_fatal" },
		{ IBV_EVENT_QP_REQ_ERR, "qp_req_err" },
		{ IBV_EVENT_QP_ACCESS_ERR, "qp_access_err" },
		{ IBV_EVENT_SQ_DRAINED, "sq_drained" },
		{ IBV_EVENT_QP_LAST_WQE_REACHED, "last_wqe_reached" },
	};
	char key[128];
	for (unsigned i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		snprintf(key, sizeof(key), "%s.events.%s.%s", name, who, kinds[i].key);
		say(key, how_many(c[kinds[i].type]));
	}
}

static void finish(struct probe *p, const char *name, struct end *a, struct end *b)
{
	char key[128];
	struct seen s;
	snprintf(key, sizeof(key), "%s.requester_state", name);
	say(key, qp_state(a->qp));
	snprintf(key, sizeof(key), "%s.responder_state", name);
	say(key, qp_state(b->qp));
	events(p, a, b, &s);
	report(name, "requester", s.on_a);
	report(name, "responder", s.on_b);
	snprintf(key, sizeof(key), "%s.events.other", name);
	say(key, how_many(s.other));
}

static const struct pair_opts opts = { .access_a = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE,
				       .access_b = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE,
				       .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
				       .rnr_timer = 1 };

/* The responder stays in RTR: a SEND lands there, the first packet. */
static void recv_in_rtr(struct probe *p)
{
	struct end a, b;
	end_make(p, &a, &opts, 0);
	end_make(p, &b, &opts, 0);
	end_init(&a, opts.access_a);
	end_init(&b, opts.access_b);
	end_rtr(p, &a, b.qp->qp_num, &opts);
	end_rtr(p, &b, a.qp->qp_num, &opts);
	end_rts(&a, &opts);
	struct ibv_mr *src = mr_make(p, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *rbuf = mr_make(p, 4096, IBV_ACCESS_LOCAL_WRITE);
	NEED(post_recv(&b, rbuf, 4096, 7) == 0);
	NEED(post_send(&a, IBV_WR_SEND, src, 64, 0, 0, 1) == 0);
	say("recv_in_rtr.responder", next_status(b.rcq, 5000));
	say("recv_in_rtr.requester", next_status(a.scq, 5000));
	finish(p, "recv_in_rtr", &a, &b);
	end_destroy(&a);
	end_destroy(&b);
	mr_free(src);
	mr_free(rbuf);
}

/* A SEND whose SGE names an lkey nobody holds. */
static void bad_lkey(struct probe *p)
{
	struct end a, b;
	pair_make(p, &a, &b, &opts);
	struct ibv_mr *src = mr_make(p, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *rbuf = mr_make(p, 4096, IBV_ACCESS_LOCAL_WRITE);
	NEED(post_recv(&b, rbuf, 4096, 7) == 0);
	struct ibv_sge sge = { .addr = (uintptr_t)src->addr, .length = 64, .lkey = src->lkey ^ 0x5500 };
	struct ibv_send_wr wr, *bad;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 1;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	NEED(ibv_post_send(a.qp, &wr, &bad) == 0);
	say("bad_lkey.requester", next_status(a.scq, 5000));
	say("bad_lkey.responder", next_status(b.rcq, 1000));
	finish(p, "bad_lkey", &a, &b);
	end_destroy(&a);
	end_destroy(&b);
	mr_free(src);
	mr_free(rbuf);
}

/* An RDMA READ of 64 bytes starting 32 bytes before the end of the MR. */
static void read_past_end(struct probe *p)
{
	struct end a, b;
	pair_make(p, &a, &b, &opts);
	struct ibv_mr *dst = mr_make(p, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *srcm = mr_make(p, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	struct ibv_mr *rbuf = mr_make(p, 4096, IBV_ACCESS_LOCAL_WRITE);
	NEED(post_recv(&b, rbuf, 4096, 7) == 0);
	NEED(post_send(&a, IBV_WR_RDMA_READ, dst, 64, (uintptr_t)srcm->addr + 4096 - 32,
		       srcm->rkey, 1) == 0);
	say("read_past_end.requester", next_status(a.scq, 5000));
	say("read_past_end.responder_recv", next_status(b.rcq, 1000));
	finish(p, "read_past_end", &a, &b);
	end_destroy(&a);
	end_destroy(&b);
	mr_free(dst);
	mr_free(srcm);
	mr_free(rbuf);
}

int main(void)
{
	struct probe p;
	probe_open(&p);
	recv_in_rtr(&p);
	bad_lkey(&p);
	read_past_end(&p);
	probe_close(&p);
	return 0;
}
