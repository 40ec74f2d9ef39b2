/* Completion faults: N signaled RDMA writes between two connected RC QPs
 * on the sim; prints the status of each completion as the program sees
 * it (`ibv_poll_cq`, a static inline verb of verbs.h), one per line. */
#include <stdio.h>
#include <stdlib.h>

#include "rc_pair.h"

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 3;
	struct ibv_device **list = ibv_get_device_list(NULL);
	CHECK(list && list[0] && list[1]);
	static struct side a, b;
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	setup(&a, list[0], access);
	setup(&b, list[1], access);
	reconnect(&a, &b);
	for (int i = 0; i < n; i++) {
		CHECK(post_rdma(&a, IBV_WR_RDMA_WRITE, 100 + i, a.buf, 8, a.mr->lkey,
				(uintptr_t)b.buf, b.mr->rkey) == 0);
		struct ibv_wc wc = poll_one(a.cq);
		CHECK(wc.wr_id == (uint64_t)(100 + i));
		printf("%d\n", (int)wc.status);
	}
	/* Everything released: only the injected statuses may differ. */
	for (struct side *s = &a; s; s = s == &a ? &b : NULL) {
		CHECK(ibv_destroy_qp(s->qp) == 0 && ibv_dereg_mr(s->mr) == 0);
		CHECK(ibv_destroy_cq(s->cq) == 0 && ibv_dealloc_pd(s->pd) == 0);
		CHECK(ibv_close_device(s->ctx) == 0);
	}
	ibv_free_device_list(list);
	return 0;
}
