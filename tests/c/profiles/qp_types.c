/* What a device's provider offers besides RC QPs, tried: a UC and a UD
 * QP and a shared receive queue, each "ok" or the errno it fails with. */
#include "../fidelity/probe.h"

static void try_qp(struct probe *p, struct ibv_cq *cq, const char *key, enum ibv_qp_type type)
{
	struct ibv_qp_init_attr qa = { .send_cq = cq, .recv_cq = cq, .qp_type = type,
				       .cap = { .max_send_wr = 4, .max_recv_wr = 4,
						.max_send_sge = 1, .max_recv_sge = 1 } };
	errno = 0;
	struct ibv_qp *qp = ibv_create_qp(p->pd, &qa);
	say(key, qp ? "ok" : errno_name(errno));
	if (qp)
		NEED(ibv_destroy_qp(qp) == 0);
}

int main(void)
{
	struct probe p;
	probe_open(&p);
	struct ibv_cq *cq = ibv_create_cq(p.ctx, 16, NULL, NULL, 0);
	NEED(cq);
	try_qp(&p, cq, "create_qp_uc", IBV_QPT_UC);
	try_qp(&p, cq, "create_qp_ud", IBV_QPT_UD);
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	errno = 0;
	struct ibv_srq *srq = ibv_create_srq(p.pd, &sa);
	say("create_srq", srq ? "ok" : errno_name(errno));
	if (srq)
		NEED(ibv_destroy_srq(srq) == 0);
	NEED(ibv_destroy_cq(cq) == 0);
	probe_close(&p);
	return 0;
}
