/* The requester's completion of a SEND: its opcode and byte_len (rxe
 * reports the bytes sent); the responder's, for comparison. */
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
	struct ibv_mr *dst = mr_make(&p, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	NEED(post_recv(&b, dst, 4096, 7) == 0);
	NEED(post_send(&a, IBV_WR_SEND, src, 200, 0, 0, 1) == 0);
	struct ibv_wc wc;
	NEED(poll_one(a.scq, 5000, &wc));
	say("send.status", wc_name(wc.status));
	say_int("send.opcode", wc.opcode);
	say_int("send.byte_len", wc.byte_len);
	NEED(poll_one(b.rcq, 5000, &wc));
	say("recv.status", wc_name(wc.status));
	say_int("recv.opcode", wc.opcode);
	say_int("recv.byte_len", wc.byte_len);
	NEED(post_send(&a, IBV_WR_RDMA_WRITE, src, 100, (uintptr_t)dst->addr, dst->rkey, 2) == 0);
	NEED(poll_one(a.scq, 5000, &wc));
	say("write.status", wc_name(wc.status));
	say_int("write.opcode", wc.opcode);
	say_int("write.byte_len", wc.byte_len);
	end_destroy(&a);
	end_destroy(&b);
	mr_free(src);
	mr_free(dst);
	probe_close(&p);
	return 0;
}
