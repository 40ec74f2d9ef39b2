/* The verbs a device's provider may lack beyond those of the features
 * probe, tried: a UC and a UD QP, a shared receive queue, an address
 * handle to the device's own GID (or LID), an access change by
 * ibv_rereg_mr and an XRC receive QP (by ibv_create_qp_ex on an XRC
 * domain), each "ok" or the errno it fails with; and what ibv_post_send
 * returns for one SGE more than a connected RC QP took. */
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

static void try_ah(struct probe *p)
{
	struct ibv_ah_attr aa = { .port_num = 1, .dlid = p->lid };
	if (!p->lid) {
		aa.is_global = 1;
		aa.grh.dgid = p->gid;
		aa.grh.sgid_index = p->gid_index;
		aa.grh.hop_limit = 1;
	}
	errno = 0;
	struct ibv_ah *ah = ibv_create_ah(p->pd, &aa);
	say("create_ah", ah ? "ok" : errno_name(errno));
	if (ah)
		NEED(ibv_destroy_ah(ah) == 0);
}

static void try_rereg(struct probe *p)
{
	static char buf[4096];
	struct ibv_mr *mr = ibv_reg_mr(p->pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	NEED(mr);
	errno = 0;
	int rc = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	say("rereg_mr", rc == 0 ? "ok" : errno_name(errno));
	NEED(ibv_dereg_mr(mr) == 0);
}

static void try_xrc_recv(struct probe *p)
{
	struct ibv_xrcd_init_attr xa = { .comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
					 .fd = -1, .oflags = O_CREAT };
	errno = 0;
	struct ibv_xrcd *xrcd = ibv_open_xrcd(p->ctx, &xa);
	if (!xrcd) {
		say("create_qp_xrc_recv", errno_name(errno));
		return;
	}
	struct ibv_qp_init_attr_ex qa = { .qp_type = IBV_QPT_XRC_RECV, .xrcd = xrcd,
					  .comp_mask = IBV_QP_INIT_ATTR_XRCD };
	errno = 0;
	struct ibv_qp *qp = ibv_create_qp_ex(p->ctx, &qa);
	say("create_qp_xrc_recv", qp ? "ok" : errno_name(errno));
	if (qp)
		NEED(ibv_destroy_qp(qp) == 0);
	NEED(ibv_close_xrcd(xrcd) == 0);
}

static void try_posts(struct probe *p)
{
	struct pair_opts o = { 0 };
	struct end a, b;
	pair_make(p, &a, &b, &o);
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr ia;
	NEED(ibv_query_qp(a.qp, &qa, IBV_QP_CAP, &ia) == 0);
	struct ibv_mr *mr = mr_make(p, 4096, IBV_ACCESS_LOCAL_WRITE);
	int n = (int)qa.cap.max_send_sge + 1;
	struct ibv_sge *sge = calloc((size_t)n, sizeof(*sge));
	NEED(sge);
	for (int i = 0; i < n; i++)
		sge[i] = (struct ibv_sge){ .addr = (uintptr_t)mr->addr, .length = 8, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .sg_list = sge, .num_sge = n, .opcode = IBV_WR_SEND }, *bad = NULL;
	int rc = ibv_post_send(a.qp, &wr, &bad);
	say("post_too_many_sges", rc == 0 ? "ok" : errno_name(rc));
	free(sge);
	mr_free(mr);
	end_destroy(&a);
	end_destroy(&b);
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
	try_ah(&p);
	try_rereg(&p);
	try_xrc_recv(&p);
	try_posts(&p);
	NEED(ibv_destroy_cq(cq) == 0);
	probe_close(&p);
	return 0;
}
