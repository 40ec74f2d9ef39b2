/*
 * Makes N calls of one verb and prints, per call, its number, whether it
 * failed and errno (or the PD handle / MR lkey / QP number it got), for
 * tests/faults.rs to check where the shim's fault rules struck.
 *
 *   calls pd N | mr N | qp N | modify N | threads N (4 threads x N PDs)
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

static char buf[1 << 12];
static struct ibv_pd *base_pd;
static int per_thread, failed_in_threads;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void *allocs(void *ctx)
{
	for (int i = 0; i < per_thread; i++) {
		struct ibv_pd *pd = ibv_alloc_pd(ctx);
		if (!pd) {
			pthread_mutex_lock(&lock);
			failed_in_threads++;
			pthread_mutex_unlock(&lock);
		} else {
			ibv_dealloc_pd(pd);
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	const char *what = argv[1];
	int n = atoi(argv[2]);
	struct ibv_device **list = ibv_get_device_list(NULL);
	if (!list || !list[0])
		return 3;
	struct ibv_context *ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!ctx)
		return 3;
	if (!strcmp(what, "threads")) {
		pthread_t t[4];
		per_thread = n;
		for (int i = 0; i < 4; i++)
			pthread_create(&t[i], NULL, allocs, ctx);
		for (int i = 0; i < 4; i++)
			pthread_join(t[i], NULL);
		printf("failed %d of %d\n", failed_in_threads, 4 * n);
		ibv_close_device(ctx);
		return 0;
	}
	if (strcmp(what, "pd")) {
		base_pd = ibv_alloc_pd(ctx);
		if (!base_pd)
			return 3;
	}
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!cq)
		return 3;
	struct ibv_qp_init_attr init = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp *qp0 = NULL;
	if (!strcmp(what, "modify") && !(qp0 = ibv_create_qp(base_pd, &init)))
		return 3;
	void *made[256] = { 0 };
	for (int i = 1; i <= n && i < 256; i++) {
		errno = 0;
		if (!strcmp(what, "pd")) {
			struct ibv_pd *pd = ibv_alloc_pd(ctx);
			made[i] = pd;
			if (pd)
				printf("%d ok %u\n", i, pd->handle);
		} else if (!strcmp(what, "mr")) {
			struct ibv_mr *mr = ibv_reg_mr(base_pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
			made[i] = mr;
			if (mr)
				printf("%d ok %u\n", i, mr->lkey);
		} else if (!strcmp(what, "qp")) {
			struct ibv_qp *qp = ibv_create_qp(base_pd, &init);
			made[i] = qp;
			if (qp)
				printf("%d ok %u\n", i, qp->qp_num);
		} else {
			struct ibv_qp_attr attr = { .qp_state = IBV_QPS_RESET };
			int rc = ibv_modify_qp(qp0, &attr, IBV_QP_STATE);
			if (rc)
				printf("%d fail rc=%d %s\n", i, rc, strerror(rc));
			else
				printf("%d ok 0\n", i);
			continue;
		}
		if (!made[i])
			printf("%d fail %s\n", i, strerror(errno));
	}
	for (int i = 1; i <= n && i < 256; i++) {
		if (!made[i])
			continue;
		if (!strcmp(what, "pd"))
			ibv_dealloc_pd(made[i]);
		else if (!strcmp(what, "mr"))
			ibv_dereg_mr(made[i]);
		else if (!strcmp(what, "qp"))
			ibv_destroy_qp(made[i]);
	}
	if (qp0)
		ibv_destroy_qp(qp0);
	ibv_destroy_cq(cq);
	if (base_pd)
		ibv_dealloc_pd(base_pd);
	ibv_close_device(ctx);
	return 0;
}
