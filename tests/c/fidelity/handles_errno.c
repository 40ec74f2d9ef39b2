/* What a destroy of an object whose handle the program changed returns:
 * the kernel looks the handle up and does not find it (ENOENT) for a QP,
 * CQ, SRQ, MR, AH, PD and memory window alike; with the handle put back
 * the destroy works. A type 1 window's bind with a changed handle is
 * shown too (rxe's provider posts it by rkey, not handle). */
#include "probe.h"

static const char *rc_name(int rc)
{
	return rc == 0 ? "ok" : errno_name(rc);
}

int main(void)
{
	struct probe p;
	probe_open(&p);
	struct pair_opts o = { .access_a = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND,
			       .access_b = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND,
			       .timeout = 14, .retry_cnt = 7, .rnr_retry = 7, .rnr_timer = 1 };
	struct end a, b;
	pair_make(&p, &a, &b, &o);
	uint32_t h;

	h = a.qp->handle;
	a.qp->handle = h + 1000;
	say("qp.destroy", rc_name(ibv_destroy_qp(a.qp)));
	a.qp->handle = h;
	say("cq.destroy_in_use", rc_name(ibv_destroy_cq(a.scq)));
	h = a.rcq->handle;
	a.rcq->handle = h + 1000;
	say("cq.destroy", rc_name(ibv_destroy_cq(a.rcq)));
	a.rcq->handle = h;

	struct ibv_srq_init_attr sa;
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 4;
	sa.attr.max_sge = 1;
	struct ibv_srq *srq = ibv_create_srq(p.pd, &sa);
	NEED(srq);
	h = srq->handle;
	srq->handle = h + 1000;
	say("srq.destroy", rc_name(ibv_destroy_srq(srq)));
	srq->handle = h;
	say("srq.destroy_restored", rc_name(ibv_destroy_srq(srq)));

	struct ibv_mr *mr = mr_make(&p, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
						      IBV_ACCESS_MW_BIND);
	h = mr->handle;
	mr->handle = h + 1000;
	say("mr.dereg", rc_name(ibv_dereg_mr(mr)));
	mr->handle = h;

	struct ibv_ah_attr aa;
	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	aa.grh.dgid = p.gid;
	aa.grh.sgid_index = (uint8_t)p.gid_index;
	aa.grh.hop_limit = 64;
	aa.port_num = 1;
	struct ibv_ah *ah = ibv_create_ah(p.pd, &aa);
	NEED(ah);
	h = ah->handle;
	ah->handle = h + 1000;
	say("ah.destroy", rc_name(ibv_destroy_ah(ah)));
	ah->handle = h;
	say("ah.destroy_restored", rc_name(ibv_destroy_ah(ah)));

	struct ibv_mw *mw = ibv_alloc_mw(p.pd, IBV_MW_TYPE_1);
	say("mw.type1", mw ? "allocated" : errno_name(errno));
	if (mw) {
		h = mw->handle;
		mw->handle = h + 1000;
		struct ibv_mw_bind bind;
		memset(&bind, 0, sizeof(bind));
		bind.wr_id = 5;
		bind.send_flags = IBV_SEND_SIGNALED;
		bind.bind_info.mr = mr;
		bind.bind_info.addr = (uintptr_t)mr->addr;
		bind.bind_info.length = 4096;
		bind.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
		int rc = ibv_bind_mw(b.qp, mw, &bind);
		say("mw.bind_changed_handle", rc_name(rc));
		if (rc == 0)
			say("mw.bind_changed_handle_status", next_status(b.scq, 5000));
		say("mw.dealloc", rc_name(ibv_dealloc_mw(mw)));
		mw->handle = h;
		say("mw.dealloc_restored", rc_name(ibv_dealloc_mw(mw)));
	}
	mr_free(mr);

	h = p.pd->handle;
	end_destroy(&a);
	end_destroy(&b);
	p.pd->handle = h + 1000;
	say("pd.dealloc", rc_name(ibv_dealloc_pd(p.pd)));
	p.pd->handle = h;
	probe_close(&p);
	return 0;
}
