/* Features a device may lack, tried: how each fails (or "ok"). XRC
 * domains, on-demand paging, device memory, thread and parent domains,
 * completion timestamps, memory windows of both types, an extended QP. */
#include <sys/mman.h>

#include "probe.h"

static void ok_or(const char *key, const void *obj)
{
	say(key, obj ? "ok" : errno_name(errno));
}

int main(void)
{
	struct probe p;
	probe_open(&p);

	errno = 0;
	struct ibv_xrcd_init_attr xa = { .comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
					 .fd = -1, .oflags = O_CREAT };
	struct ibv_xrcd *xrcd = ibv_open_xrcd(p.ctx, &xa);
	ok_or("open_xrcd", xrcd);
	if (xrcd)
		NEED(ibv_close_xrcd(xrcd) == 0);

	char *buf = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	NEED(buf != MAP_FAILED);
	errno = 0;
	struct ibv_mr *mr = ibv_reg_mr(p.pd, buf, 1 << 16, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
	ok_or("reg_mr_on_demand", mr);
	if (mr)
		NEED(ibv_dereg_mr(mr) == 0);

	errno = 0;
	struct ibv_alloc_dm_attr da = { .length = 4096 };
	struct ibv_dm *dm = ibv_alloc_dm(p.ctx, &da);
	ok_or("alloc_dm", dm);
	if (dm)
		NEED(ibv_free_dm(dm) == 0);

	errno = 0;
	struct ibv_td_init_attr ta = { 0 };
	struct ibv_td *td = ibv_alloc_td(p.ctx, &ta);
	ok_or("alloc_td", td);
	if (td)
		NEED(ibv_dealloc_td(td) == 0);

	errno = 0;
	struct ibv_parent_domain_init_attr pda = { .pd = p.pd };
	struct ibv_pd *parent = ibv_alloc_parent_domain(p.ctx, &pda);
	ok_or("alloc_parent_domain", parent);
	if (parent)
		NEED(ibv_dealloc_pd(parent) == 0);

	errno = 0;
	struct ibv_cq_init_attr_ex ca = { .cqe = 16, .wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP };
	struct ibv_cq_ex *cq = ibv_create_cq_ex(p.ctx, &ca);
	ok_or("create_cq_ex_timestamp", cq);
	if (cq)
		NEED(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)) == 0);

	errno = 0;
	ca.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_QP_NUM;
	cq = ibv_create_cq_ex(p.ctx, &ca);
	ok_or("create_cq_ex_byte_len", cq);

	errno = 0;
	struct ibv_mw *mw = ibv_alloc_mw(p.pd, IBV_MW_TYPE_1);
	ok_or("alloc_mw_type_1", mw);
	if (mw)
		NEED(ibv_dealloc_mw(mw) == 0);
	errno = 0;
	mw = ibv_alloc_mw(p.pd, IBV_MW_TYPE_2);
	ok_or("alloc_mw_type_2", mw);
	if (mw)
		NEED(ibv_dealloc_mw(mw) == 0);

	if (cq) {
		struct ibv_qp_init_attr_ex qa;
		memset(&qa, 0, sizeof(qa));
		qa.send_cq = ibv_cq_ex_to_cq(cq);
		qa.recv_cq = ibv_cq_ex_to_cq(cq);
		qa.qp_type = IBV_QPT_RC;
		qa.cap.max_send_wr = 4;
		qa.cap.max_recv_wr = 4;
		qa.cap.max_send_sge = 1;
		qa.cap.max_recv_sge = 1;
		qa.pd = p.pd;
		qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		qa.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE;
		errno = 0;
		struct ibv_qp *qp = ibv_create_qp_ex(p.ctx, &qa);
		ok_or("create_qp_ex_send_ops", qp);
		if (qp)
			NEED(ibv_destroy_qp(qp) == 0);
		qa.send_ops_flags = IBV_QP_EX_WITH_TSO;
		errno = 0;
		qp = ibv_create_qp_ex(p.ctx, &qa);
		ok_or("create_qp_ex_tso", qp);
		if (qp)
			NEED(ibv_destroy_qp(qp) == 0);
		NEED(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)) == 0);
	}
	NEED(munmap(buf, 1 << 16) == 0);
	probe_close(&p);
	return 0;
}
