/* Flushed completions under the data-path checks' error explainer.
 *
 *   flush_flood flood THREADS   each thread on its own connected RC pair:
 *                               3 good RDMA WRITEs through an MR, the MR
 *                               deregistered, then 200 WRITEs through its
 *                               dead lkey, each polled on its own, the
 *                               CQ drained by each poll (one
 *                               local protection error, then 199 flushed
 *                               as the QP is in ERR). Prints "flushed N"
 *                               with the flushed completions polled.
 *   flush_flood teardown        a well-behaved teardown: receives posted,
 *                               the QP moved to ERR and its flushed
 *                               receives polled; receives posted on the
 *                               other QP, which is destroyed.
 *
 * Everything is destroyed before exit. */
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "check.h"
#include "rc_pair.h"

#define SITE __attribute__((noipa))

static struct ibv_device **devs;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long flushed_total;

static void teardown_side(struct side *s)
{
	if (s->qp)
		CHECK(ibv_destroy_qp(s->qp) == 0);
	CHECK(ibv_dereg_mr(s->mr) == 0);
	CHECK(ibv_destroy_cq(s->cq) == 0);
	CHECK(ibv_dealloc_pd(s->pd) == 0);
	CHECK(ibv_close_device(s->ctx) == 0);
}

SITE static int write_through(struct side *s, struct side *peer, uint32_t lkey, uint64_t id)
{
	return post_rdma(s, IBV_WR_RDMA_WRITE, id, s->buf, 64, lkey, (uintptr_t)peer->buf,
			 peer->mr->rkey);
}

/* One completion, polled for with room for four (each poll that finds it
 * drains the CQ, as a program's polling loop does). */
static struct ibv_wc poll_drained(struct ibv_cq *cq)
{
	struct ibv_wc wc[4];
	for (;;) {
		int n = ibv_poll_cq(cq, 4, wc);
		CHECK(n == 0 || n == 1);
		if (n == 1)
			return wc[0];
	}
}

static void *flood_thread(void *arg)
{
	(void)arg;
	struct side a, b;
	setup(&a, devs[0], IBV_ACCESS_LOCAL_WRITE);
	setup(&b, devs[1], IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	connect_pair(&a, &b);
	struct ibv_mr *doomed = ibv_reg_mr(a.pd, a.buf, sizeof(a.buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(doomed);
	uint32_t lkey = doomed->lkey;
	for (int i = 0; i < 3; i++) {
		CHECK(write_through(&a, &b, lkey, i) == 0);
		CHECK(poll_one(a.cq).status == IBV_WC_SUCCESS);
	}
	CHECK(ibv_dereg_mr(doomed) == 0);
	long flushed = 0;
	for (int i = 0; i < 200; i++) {
		CHECK(write_through(&a, &b, lkey, 0x1000 + i) == 0);
		struct ibv_wc wc = poll_drained(a.cq);
		if (wc.status == IBV_WC_WR_FLUSH_ERR)
			flushed++;
		else
			CHECK(i == 0 && wc.status != IBV_WC_SUCCESS);
	}
	teardown_side(&a);
	teardown_side(&b);
	pthread_mutex_lock(&lock);
	flushed_total += flushed;
	pthread_mutex_unlock(&lock);
	return NULL;
}

static void flood(int threads)
{
	pthread_t t[64];
	CHECK(threads > 0 && threads <= 64);
	/* Held across the threads: the process stays on the fabric, whose QP
	 * numbers then stay unique (a fabric every process left starts its
	 * numbering again), so the log's lines tell the QPs apart. */
	struct ibv_context *held = ibv_open_device(devs[0]);
	CHECK(held);
	for (int i = 0; i < threads; i++)
		CHECK(pthread_create(&t[i], NULL, flood_thread, NULL) == 0);
	for (int i = 0; i < threads; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	CHECK(ibv_close_device(held) == 0);
	printf("flushed %ld\n", flushed_total);
}

static void teardown(void)
{
	struct side a, b;
	setup(&a, devs[0], IBV_ACCESS_LOCAL_WRITE);
	setup(&b, devs[1], IBV_ACCESS_LOCAL_WRITE);
	connect_pair(&a, &b);
	for (int i = 0; i < 4; i++) {
		post_recv(&b, 0x100 + i, b.buf, 64);
		post_recv(&a, 0x200 + i, a.buf, 64);
	}
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };
	CHECK(ibv_modify_qp(b.qp, &attr, IBV_QP_STATE) == 0);
	int flushed = 0;
	for (int i = 0; i < 4; i++) {
		struct ibv_wc wc = poll_one(b.cq);
		CHECK(wc.status == IBV_WC_WR_FLUSH_ERR && wc.wr_id == (uint64_t)0x100 + i);
		flushed++;
	}
	CHECK(ibv_destroy_qp(a.qp) == 0);
	a.qp = NULL;
	struct ibv_wc wc[8];
	int left = ibv_poll_cq(a.cq, 8, wc);
	CHECK(left >= 0);
	for (int i = 0; i < left; i++)
		CHECK(wc[i].status == IBV_WC_WR_FLUSH_ERR);
	printf("flushed %d then %d\n", flushed, left);
	teardown_side(&a);
	teardown_side(&b);
}

int main(int argc, char **argv)
{
	CHECK(argc >= 2);
	devs = two_devices();
	if (!strcmp(argv[1], "flood"))
		flood(argc > 2 ? atoi(argv[2]) : 16);
	else if (!strcmp(argv[1], "teardown"))
		teardown();
	else
		CHECK(!"mode");
	ibv_free_device_list(devs);
	printf("flush_flood %s done\n", argv[1]);
	return 0;
}
