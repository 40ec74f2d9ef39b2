/* A type 2 memory window bound through a posted IBV_WR_BIND_MW whose rkey
 * has other upper bits than the window's: the bind's status, then an RDMA
 * WRITE through the rkey the window then has (its own upper 24 bits, the
 * key byte the bind gave), then one through the rkey as the bind gave it. */
#include "probe.h"

int main(void)
{
	struct probe p;
	probe_open(&p);
	struct pair_opts o = { .access_a = IBV_ACCESS_REMOTE_WRITE, .access_b = IBV_ACCESS_REMOTE_WRITE,
			       .timeout = 14, .retry_cnt = 7, .rnr_retry = 7, .rnr_timer = 1 };
	struct end a, b;
	pair_make(&p, &a, &b, &o);
	struct ibv_mr *src = mr_make(&p, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *dst = mr_make(&p, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
						       IBV_ACCESS_MW_BIND);
	struct ibv_mw *mw = ibv_alloc_mw(p.pd, IBV_MW_TYPE_2);
	NEED(mw);
	uint32_t key = (mw->rkey + 1) & 0xff;
	uint32_t given = ((mw->rkey & ~0xffu) ^ 0x00abcd00u) | key;
	uint32_t real = (mw->rkey & ~0xffu) | key;
	struct ibv_send_wr wr, *bad;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 9;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = given;
	wr.bind_mw.bind_info.mr = dst;
	wr.bind_mw.bind_info.addr = (uintptr_t)dst->addr;
	wr.bind_mw.bind_info.length = 4096;
	wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
	/* The window is bound by the responder's QP (type 2B: bound to it). */
	NEED(ibv_post_send(b.qp, &wr, &bad) == 0);
	say("bind", next_status(b.scq, 5000));
	NEED(post_send(&a, IBV_WR_RDMA_WRITE, src, 64, (uintptr_t)dst->addr, real, 1) == 0);
	say("write_window_rkey", next_status(a.scq, 5000));
	NEED(post_send(&a, IBV_WR_RDMA_WRITE, src, 64, (uintptr_t)dst->addr, given, 2) == 0);
	say("write_given_rkey", next_status(a.scq, 5000));
	end_destroy(&a);
	end_destroy(&b);
	NEED(ibv_dealloc_mw(mw) == 0);
	mr_free(src);
	mr_free(dst);
	probe_close(&p);
	return 0;
}
