/* The kernel knows objects by their `handle`: with a program's object
 * whose handle was changed, destroy / modify / query and use as a parent
 * are refused (whatever the errno: the kernel's destroys say ENOENT, its
 * other commands EINVAL), and with the handle put back they work. */
#include "probe.h"

static const char *res(int rc)
{
	return rc == 0 ? "ok" : "refused";
}

static const char *obj(const void *p)
{
	return p ? "ok" : "refused";
}

int main(void)
{
	struct probe p;
	probe_open(&p);
	struct pair_opts o = { 0 };
	struct end a;
	end_make(&p, &a, &o, 0);
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;

	uint32_t h = a.qp->handle;
	a.qp->handle = h + 1000;
	say("qp.query", res(ibv_query_qp(a.qp, &qa, IBV_QP_STATE, &qi)));
	struct ibv_qp_attr to_init = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	say("qp.modify", res(ibv_modify_qp(a.qp, &to_init, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
							       IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)));
	say("qp.destroy", res(ibv_destroy_qp(a.qp)));
	a.qp->handle = h;
	say("qp.query_restored", res(ibv_query_qp(a.qp, &qa, IBV_QP_STATE, &qi)));
	say("qp.destroy_restored", res(ibv_destroy_qp(a.qp)));

	h = a.scq->handle;
	a.scq->handle = h + 1000;
	say("cq.destroy", res(ibv_destroy_cq(a.scq)));
	a.scq->handle = h;
	say("cq.destroy_restored", res(ibv_destroy_cq(a.scq)));
	NEED(ibv_destroy_cq(a.rcq) == 0);

	void *buf = calloc(1, 4096);
	NEED(buf);
	struct ibv_mr *mr = ibv_reg_mr(p.pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	NEED(mr);
	h = mr->handle;
	mr->handle = h + 1000;
	say("mr.dereg", res(ibv_dereg_mr(mr)));
	mr->handle = h;
	say("mr.dereg_restored", res(ibv_dereg_mr(mr)));
	free(buf);

	h = p.pd->handle;
	p.pd->handle = h + 1000;
	struct ibv_cq *cq = ibv_create_cq(p.ctx, 4, NULL, NULL, 0);
	NEED(cq);
	struct ibv_qp_init_attr ia;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	struct ibv_qp *qp = ibv_create_qp(p.pd, &ia);
	say("pd.as_parent_of_qp", obj(qp));
	if (qp)
		NEED(ibv_destroy_qp(qp) == 0);
	say("pd.dealloc", res(ibv_dealloc_pd(p.pd)));
	p.pd->handle = h;
	qp = ibv_create_qp(p.pd, &ia);
	say("pd.as_parent_restored", obj(qp));
	if (qp)
		NEED(ibv_destroy_qp(qp) == 0);
	NEED(ibv_destroy_cq(cq) == 0);
	probe_close(&p);
	return 0;
}
