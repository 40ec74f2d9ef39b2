/*
 * fork() in a multi-threaded verbs program (tests/fork_safety.rs).
 *
 * usage: churn pd|list|post NTHREADS NFORKS
 *
 * NTHREADS threads churn the shim's registry (pd: ibv_dealloc_pd(ibv_alloc_pd(ctx))
 * on the first device; list: ibv_free_device_list(ibv_get_device_list()), for
 * the test bed, where no context opens; post: ibv_post_send with a dead lkey,
 * under IBV_SHIM_CHECK=datapath, so the data-path checks' locks churn) while
 * the main thread forks NFORKS times; each child calls _exit(0) at once
 * (post: after one checked post on a QP of its own). A child that has not exited
 * within 5 s is hung (it is killed); after 3 hung children the program
 * stops forking (so that a broken shim fails fast). Prints "forks=N hung=H"
 * and exits 0 when every fork could be made, whatever H is: the test
 * judges H.
 */
#include <errno.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static atomic_int stop;
static atomic_long churned;
static struct ibv_context *ctx;
static int use_pd, use_post;
static struct ibv_pd *post_pd;
static struct ibv_qp *post_qp, *child_qp;

/* A send with an lkey no MR has: the checks look it up and report it. */
static void bad_post(struct ibv_qp *qp)
{
	char byte;
	struct ibv_sge sge = { .addr = (uintptr_t)&byte, .length = 1, .lkey = 0xdead };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND }, *bad;
	ibv_post_send(qp, &wr, &bad);
}

static void *churn(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		if (use_post) {
			bad_post(post_qp);
		} else if (use_pd) {
			struct ibv_pd *pd = ibv_alloc_pd(ctx);
			if (!pd || ibv_dealloc_pd(pd)) {
				fprintf(stderr, "churn: alloc/dealloc failed: %s\n", strerror(errno));
				exit(98);
			}
		} else {
			struct ibv_device **l = ibv_get_device_list(NULL);
			if (l)
				ibv_free_device_list(l);
		}
		atomic_fetch_add(&churned, 1);
	}
	return NULL;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* 1 when the child was hung (and is now killed), 0 when it exited 0. */
static int reap(pid_t pid)
{
	double deadline = now() + 5;
	int status;
	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			break;
		if (r < 0) {
			perror("waitpid");
			exit(97);
		}
		if (now() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return 1;
		}
		usleep(200);
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "child %d: status %#x\n", (int)pid, status);
		exit(96);
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: churn pd|list NTHREADS NFORKS\n");
		return 2;
	}
	use_post = strcmp(argv[1], "post") == 0;
	use_pd = use_post || strcmp(argv[1], "pd") == 0;
	int nthreads = atoi(argv[2]), nforks = atoi(argv[3]);
	struct ibv_device **list = ibv_get_device_list(NULL);
	if (!list || !list[0]) {
		fprintf(stderr, "no devices: %s\n", strerror(errno));
		return 95;
	}
	if (use_pd) {
		ctx = ibv_open_device(list[0]);
		if (!ctx) {
			fprintf(stderr, "ibv_open_device: %s\n", strerror(errno));
			return 95;
		}
	}
	if (use_post) {
		struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
		post_pd = ibv_alloc_pd(ctx);
		struct ibv_qp_init_attr qia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
						.cap = { .max_send_wr = 16, .max_recv_wr = 16,
							 .max_send_sge = 1, .max_recv_sge = 1 } };
		post_qp = cq && post_pd ? ibv_create_qp(post_pd, &qia) : NULL;
		/* The child's own QP: no other thread holds anything of it. */
		child_qp = post_qp ? ibv_create_qp(post_pd, &qia) : NULL;
		if (!child_qp) {
			fprintf(stderr, "post set-up: %s\n", strerror(errno));
			return 95;
		}
	}
	pthread_t t[64];
	for (int i = 0; i < nthreads && i < 64; i++)
		pthread_create(&t[i], NULL, churn, NULL);
	while (atomic_load(&churned) < 100)
		usleep(100);
	int hung = 0;
	int forks = 0;
	for (; forks < nforks && hung < 3; forks++) {
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			return 94;
		}
		if (pid == 0) {
			if (use_post)
				bad_post(child_qp);
			_exit(0);
		}
		hung += reap(pid);
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < nthreads && i < 64; i++)
		pthread_join(t[i], NULL);
	printf("forks=%d hung=%d churned=%ld\n", forks, hung, atomic_load(&churned));
	if (use_pd)
		ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
