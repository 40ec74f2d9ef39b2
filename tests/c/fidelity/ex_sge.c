/* The extended QP builders' bounds (`ibv_wr_set_sge_list`,
 * `ibv_wr_set_inline_data`): how many SGEs and inline bytes a QP made
 * with `ibv_create_qp_ex` takes, against the device's max_sge and the
 * QP's own capabilities, and what `ibv_wr_complete` returns past them. */
#include "probe.h"

static struct ibv_qp *ex_qp(struct probe *p, struct end *e, uint32_t sge, uint32_t inl)
{
	e->scq = ibv_create_cq(p->ctx, 64, NULL, NULL, 0);
	e->rcq = ibv_create_cq(p->ctx, 64, NULL, NULL, 0);
	NEED(e->scq && e->rcq);
	struct ibv_qp_init_attr_ex ia;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = e->scq;
	ia.recv_cq = e->rcq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 16;
	ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = sge;
	ia.cap.max_recv_sge = 1;
	ia.cap.max_inline_data = inl;
	ia.pd = p->pd;
	ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	ia.send_ops_flags = IBV_QP_EX_WITH_SEND;
	e->qp = ibv_create_qp_ex(p->ctx, &ia);
	return e->qp;
}

static const struct pair_opts opts = { .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
				       .rnr_timer = 1 };

/* One SEND of `n` SGEs (8 bytes each) or `inl` inline bytes through the
 * builders of a's QP ex; the receive and completion, or the error. */
static void one(struct end *a, struct end *b, struct ibv_mr *mr,
		struct ibv_mr *rbuf, const char *name, size_t n, size_t inl)
{
	char key[96];
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(a->qp);
	struct ibv_sge sg[64];
	for (size_t i = 0; i < n && i < 64; i++) {
		sg[i].addr = (uintptr_t)mr->addr + 8 * i;
		sg[i].length = 8;
		sg[i].lkey = mr->lkey;
	}
	NEED(post_recv(b, rbuf, 4096, 9) == 0);
	ibv_wr_start(x);
	x->wr_id = 5;
	x->wr_flags = IBV_SEND_SIGNALED | (inl ? IBV_SEND_INLINE : 0);
	ibv_wr_send(x);
	if (inl)
		ibv_wr_set_inline_data(x, mr->addr, inl);
	else
		ibv_wr_set_sge_list(x, n, sg);
	int rc = ibv_wr_complete(x);
	snprintf(key, sizeof(key), "%s.complete", name);
	say(key, errno_name(rc));
	snprintf(key, sizeof(key), "%s.send", name);
	say(key, rc ? "not posted" : next_status(a->scq, 5000));
	struct ibv_wc wc;
	snprintf(key, sizeof(key), "%s.recv_bytes", name);
	if (rc == 0 && poll_one(b->rcq, 5000, &wc))
		say_int(key, wc.byte_len);
	else
		say(key, "none");
}

static void run(struct probe *p, const char *name, uint32_t sge, uint32_t inl,
		size_t n1, size_t n2, size_t i1, size_t i2)
{
	char key[96];
	struct end a, b;
	snprintf(key, sizeof(key), "%s.create", name);
	if (!ex_qp(p, &a, sge, inl)) {
		say(key, errno_name(errno));
		NEED(ibv_destroy_cq(a.scq) == 0 && ibv_destroy_cq(a.rcq) == 0);
		return;
	}
	say(key, "0");
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	NEED(ibv_query_qp(a.qp, &qa, IBV_QP_CAP, &qi) == 0);
	snprintf(key, sizeof(key), "%s.cap.max_send_sge", name);
	say_int(key, qi.cap.max_send_sge);
	snprintf(key, sizeof(key), "%s.cap.max_inline_data", name);
	say_int(key, qi.cap.max_inline_data);
	end_make(p, &b, &opts, 0);
	end_init(&a, 0);
	end_init(&b, 0);
	end_rtr(p, &a, b.qp->qp_num, &opts);
	end_rtr(p, &b, a.qp->qp_num, &opts);
	end_rts(&a, &opts);
	end_rts(&b, &opts);
	struct ibv_mr *mr = mr_make(p, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *rbuf = mr_make(p, 4096, IBV_ACCESS_LOCAL_WRITE);
	char sub[96];
	snprintf(sub, sizeof(sub), "%s.sge_%zu", name, n1);
	one(&a, &b, mr, rbuf, sub, n1, 0);
	snprintf(sub, sizeof(sub), "%s.sge_%zu", name, n2);
	one(&a, &b, mr, rbuf, sub, n2, 0);
	snprintf(sub, sizeof(sub), "%s.inline_%zu", name, i1);
	one(&a, &b, mr, rbuf, sub, 0, i1);
	snprintf(sub, sizeof(sub), "%s.inline_%zu", name, i2);
	one(&a, &b, mr, rbuf, sub, 0, i2);
	snprintf(key, sizeof(key), "%s.state_after", name);
	say(key, qp_state(a.qp));
	end_destroy(&a);
	end_destroy(&b);
	mr_free(mr);
	mr_free(rbuf);
}

int main(void)
{
	struct probe p;
	probe_open(&p);
	struct ibv_device_attr da;
	NEED(ibv_query_device(p.ctx, &da) == 0);
	say_int("max_sge", da.max_sge);
	/* The device's bound: 31 and 32 SGEs; 512 inline bytes and 513. */
	run(&p, "qp32", 32, 512, 31, 32, 512, 513);
	/* A QP made for 4 SGEs and 16 inline bytes: 5 SGEs, 17 and 64 bytes. */
	run(&p, "qp4", 4, 16, 4, 5, 64, 65);
	probe_close(&p);
	return 0;
}
