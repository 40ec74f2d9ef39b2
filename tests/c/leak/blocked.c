/*
 * One thread blocks inside ibv_get_cq_event (a channel that never gets an
 * event) while four others create and destroy objects on the same context
 * through the shim for a second. If the shim held a lock across the
 * forwarded call, they would hang. Then the process exits with the first
 * thread still blocked (the exit report must not wait for it either).
 */
#define _GNU_SOURCE
#include "common.h"
#include <pthread.h>
#include <time.h>
#include <unistd.h>

static struct ibv_context *ctx;
static struct ibv_comp_channel *ch;
static volatile pid_t waiter_tid;
static char buf[4][4096];

static void *waiter(void *arg)
{
	(void)arg;
	struct ibv_cq *cq;
	void *cq_ctx;
	waiter_tid = gettid();
	ibv_get_cq_event(ch, &cq, &cq_ctx);
	printf("waiter woke up\n");
	return NULL;
}

static void *worker(void *arg)
{
	long id = (long)arg, rounds = 0;
	struct timespec end, now;
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += 1;
	do {
		struct ibv_pd *pd = ibv_alloc_pd(ctx);
		struct ibv_mr *mr = pd ? ibv_reg_mr(pd, buf[id], 4096, IBV_ACCESS_LOCAL_WRITE) : NULL;
		struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, ch, 0);
		if (!pd || !mr || !cq)
			die("create");
		if (ibv_destroy_cq(cq) || ibv_dereg_mr(mr) || ibv_dealloc_pd(pd))
			die("destroy");
		rounds++;
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (now.tv_sec < end.tv_sec || (now.tv_sec == end.tv_sec && now.tv_nsec < end.tv_nsec));
	return (void *)rounds;
}

int main(void)
{
	struct ibv_device **list;
	ctx = open_first(&list);
	ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, ch, 0);
	if (!ch || !cq || ibv_req_notify_cq(cq, 0))
		die("setup");
	pthread_t w, t[4];
	pthread_create(&w, NULL, waiter, NULL);
	while (!waiter_tid)
		usleep(1000);
	/* Wait until the waiter sleeps in the kernel, inside the real verb. */
	char path[64], stat[512];
	snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)waiter_tid);
	for (int i = 0;; i++) {
		FILE *f = fopen(path, "r");
		if (!f || !fgets(stat, sizeof stat, f))
			die("read %s", path);
		fclose(f);
		char *state = strrchr(stat, ')');
		if (state && state[2] == 'S')
			break;
		if (i == 5000)
			die("the waiter never blocked: %s", stat);
		usleep(1000);
	}
	printf("waiter blocked in ibv_get_cq_event\n");
	fflush(stdout);
	long total = 0;
	for (long i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	for (int i = 0; i < 4; i++) {
		void *r;
		pthread_join(t[i], &r);
		total += (long)r;
	}
	printf("workers done: %ld rounds\n", total);
	fflush(stdout);
	return 0;
}
