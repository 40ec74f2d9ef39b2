/* Many threads creating and destroying resources on one context, and on a
 * second context at the same time. */
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdint.h>

#include "check.h"

#define THREADS 8
#define ROUNDS 200

static struct ibv_context *ctxs[2];

static void *worker(void *arg)
{
	struct ibv_context *ctx = ctxs[(uintptr_t)arg % 2];
	static __thread char buf[4096];
	for (int i = 0; i < ROUNDS; i++) {
		struct ibv_pd *pd = ibv_alloc_pd(ctx);
		CHECK(pd);
		struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
		struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
		CHECK(mr && cq);
		struct ibv_qp_init_attr qia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
						.cap = { .max_send_wr = 1, .max_recv_wr = 1,
							 .max_send_sge = 1, .max_recv_sge = 1 } };
		struct ibv_qp *qp = ibv_create_qp(pd, &qia);
		CHECK(qp);
		CHECK(ibv_dealloc_pd(pd) == EBUSY);
		CHECK(ibv_destroy_qp(qp) == 0);
		CHECK(ibv_destroy_cq(cq) == 0);
		CHECK(ibv_dereg_mr(mr) == 0);
		CHECK(ibv_dealloc_pd(pd) == 0);
	}
	return NULL;
}

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	CHECK(list && list[0] && list[1]);
	ctxs[0] = ibv_open_device(list[0]);
	ctxs[1] = ibv_open_device(list[1]);
	CHECK(ctxs[0] && ctxs[1]);
	pthread_t t[THREADS];
	for (uintptr_t i = 0; i < THREADS; i++)
		CHECK(pthread_create(&t[i], NULL, worker, (void *)i) == 0);
	for (int i = 0; i < THREADS; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	CHECK(ibv_close_device(ctxs[0]) == 0);
	CHECK(ibv_close_device(ctxs[1]) == 0);
	ibv_free_device_list(list);
	DONE("sim_threads");
}
