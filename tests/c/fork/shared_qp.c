/*
 * fork() while other threads use a QP, and the child posts on that QP
 * (tests/fork_safety.rs).
 *
 * usage: shared_qp NTHREADS NFORKS [own]
 *
 * An RC pair on the sim's two devices (rc_pair.h). NTHREADS threads post
 * signaled RDMA WRITEs on side a's QP and poll its CQ, so the QP's, the
 * CQ's, the peer's and the key tables' locks are taken all the time,
 * while the main thread forks NFORKS times. Each child posts one WRITE on
 * the parent's QP and polls its CQ: the QP is not the child's (as with
 * rdma-core's providers, a child cannot use its parent's queues), so the
 * post may fail, but it must return. With "own", each child then also
 * makes an RC pair of its own (new contexts) and must complete a WRITE on
 * it: the sim's process-wide tables (QPs by number, MRs by key), which
 * the parent's threads keep busy, must work in the child. A child that
 * has not exited within 5 s is hung (it is killed); after 3 hung children
 * the program stops forking. Prints "forks=N hung=H refused=R" (R: children whose post
 * failed) and exits 0 when every fork could be made: the test judges H.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rc_pair.h"

static atomic_int stop;
static atomic_long churned;
static struct side a, b;

/* A CHECK that failed in a child's own pair (it calls exit(1)). */
static void own_failed(void)
{
	_exit(3);
}

static int write_one(void)
{
	return post_rdma(&a, IBV_WR_RDMA_WRITE, 1, a.buf, 64, a.mr->lkey, (uintptr_t)b.buf,
			 b.mr->rkey);
}

static void *churn(void *arg)
{
	(void)arg;
	struct ibv_wc wc[16];
	while (!atomic_load(&stop)) {
		/* ENOMEM when the send queue is full: the polls make room. */
		write_one();
		if (ibv_poll_cq(a.cq, 16, wc) < 0) {
			fprintf(stderr, "churn: poll failed\n");
			exit(98);
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

/* -1 when the child was hung (and is now killed), else its exit code. */
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
			return -1;
		}
		usleep(200);
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) > 1) {
		fprintf(stderr, "child %d: status %#x\n", (int)pid, status);
		exit(96);
	}
	return WEXITSTATUS(status);
}

int main(int argc, char **argv)
{
	if (argc != 3 && !(argc == 4 && !strcmp(argv[3], "own"))) {
		fprintf(stderr, "usage: shared_qp NTHREADS NFORKS [own]\n");
		return 2;
	}
	int nthreads = atoi(argv[1]), nforks = atoi(argv[2]), own = argc == 4;
	struct ibv_device **list = ibv_get_device_list(NULL);
	CHECK(list && list[0] && list[1]);
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	setup(&a, list[0], access);
	setup(&b, list[1], access);
	connect_rc(&a, &b);
	connect_rc(&b, &a);
	pthread_t t[64];
	for (int i = 0; i < nthreads && i < 64; i++)
		pthread_create(&t[i], NULL, churn, NULL);
	while (atomic_load(&churned) < 100)
		usleep(100);
	int hung = 0, refused = 0, forks = 0;
	for (; forks < nforks && hung < 3; forks++) {
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			return 94;
		}
		if (pid == 0) {
			struct ibv_wc wc;
			int failed = write_one() != 0;
			failed |= ibv_poll_cq(a.cq, 1, &wc) < 0;
			if (own) {
				static struct side c, d;
				atexit(own_failed);
				setup(&c, list[0], access);
				setup(&d, list[1], access);
				connect_rc(&c, &d);
				connect_rc(&d, &c);
				if (rdma(&c, IBV_WR_RDMA_WRITE, c.buf, 64, (uintptr_t)d.buf,
					 d.mr->rkey) != IBV_WC_SUCCESS)
					_exit(3);
			}
			_exit(failed);
		}
		int r = reap(pid);
		hung += r < 0;
		refused += r == 1;
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < nthreads && i < 64; i++)
		pthread_join(t[i], NULL);
	printf("forks=%d hung=%d refused=%d churned=%ld\n", forks, hung, refused,
	       atomic_load(&churned));
	struct side *sides[] = { &a, &b };
	for (int i = 0; i < 2; i++) {
		struct side *s = sides[i];
		CHECK(ibv_destroy_qp(s->qp) == 0 && ibv_dereg_mr(s->mr) == 0);
		CHECK(ibv_destroy_cq(s->cq) == 0 && ibv_dealloc_pd(s->pd) == 0);
		CHECK(ibv_close_device(s->ctx) == 0);
	}
	ibv_free_device_list(list);
	return 0;
}
