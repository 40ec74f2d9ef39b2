/*
 * 8 threads create and destroy PDs, MRs, CQs and QPs for SECONDS seconds,
 * on one shared context ("one") or one context each ("many"), then each
 * leaks LEAK PDs with one MR on each. The contexts are then closed and the
 * device list freed, so with LEAK = 0 nothing is left.
 *   threads one|many SECONDS LEAK
 */
#include "common.h"
#include <pthread.h>
#include <time.h>

#define THREADS 8

static int seconds, leak;
static char buf[THREADS][4096];

struct worker {
	int id;
	struct ibv_context *ctx;
	long rounds;
};

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	double end = now() + seconds;
	while (now() < end) {
		for (int i = 0; i < 64; i++) {
			struct ibv_pd *pd = ibv_alloc_pd(w->ctx);
			if (!pd)
				die("ibv_alloc_pd");
			struct ibv_mr *mr = ibv_reg_mr(pd, buf[w->id], 4096, IBV_ACCESS_LOCAL_WRITE);
			struct ibv_cq *cq = ibv_create_cq(w->ctx, 4, NULL, NULL, 0);
			if (!mr || !cq)
				die("ibv_reg_mr/ibv_create_cq");
			struct ibv_qp *qp = rc_qp(pd, cq, cq, NULL);
			if (!qp)
				die("ibv_create_qp");
			int rc = ibv_destroy_qp(qp) | ibv_destroy_cq(cq) | ibv_dereg_mr(mr) | ibv_dealloc_pd(pd);
			if (rc)
				die("destroy: %d", rc);
			w->rounds++;
		}
	}
	for (int i = 0; i < leak; i++) {
		struct ibv_pd *pd = ibv_alloc_pd(w->ctx);
		if (!pd || !ibv_reg_mr(pd, buf[w->id], 4096, IBV_ACCESS_LOCAL_WRITE))
			die("leak");
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 4)
		die("usage: threads one|many SECONDS LEAK");
	int many = strcmp(argv[1], "many") == 0;
	seconds = atoi(argv[2]);
	leak = atoi(argv[3]);
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list || n < 1)
		die("ibv_get_device_list");
	struct worker w[THREADS];
	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++) {
		w[i].id = i;
		w[i].rounds = 0;
		w[i].ctx = (i == 0 || many) ? ibv_open_device(list[i % n]) : w[0].ctx;
		if (!w[i].ctx)
			die("ibv_open_device");
	}
	for (int i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, work, &w[i]);
	long total = 0;
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		total += w[i].rounds;
	}
	for (int i = 0; i < THREADS; i++)
		if ((i == 0 || many) && ibv_close_device(w[i].ctx))
			die("ibv_close_device");
	ibv_free_device_list(list);
	printf("rounds %ld\n", total);
	return 0;
}
