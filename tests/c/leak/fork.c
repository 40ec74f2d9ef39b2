/*
 * A parent and two children, each leaking differently. The parent leaks a
 * PD (and its context and device list). Child 1 opens its own context and
 * leaks it with a PD, and leaks a PD on the parent's context. Child 2 never
 * calls verbs. Prints "ROLE pid=N" and "ROLE obj KIND HANDLE".
 */
#include "common.h"
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
	struct ibv_device **list;
	struct ibv_context *ctx = open_first(&list);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	if (!pd)
		die("ibv_alloc_pd");
	printf("parent pid=%d\n", getpid());
	printf("parent obj pd 0x%lx\n", (unsigned long)(uintptr_t)pd);
	fflush(stdout);

	pid_t c1 = fork();
	if (c1 < 0)
		die("fork");
	if (c1 == 0) {
		struct ibv_device **mine;
		struct ibv_context *own = open_first(&mine);
		struct ibv_pd *a = ibv_alloc_pd(own);
		struct ibv_pd *b = ibv_alloc_pd(ctx);
		if (!a || !b)
			die("child ibv_alloc_pd");
		printf("child1 pid=%d\n", getpid());
		printf("child1 obj pd 0x%lx\n", (unsigned long)(uintptr_t)a);
		printf("child1 obj pd 0x%lx\n", (unsigned long)(uintptr_t)b);
		printf("child1 own-context 0x%lx\n", (unsigned long)(uintptr_t)own);
		exit(0);
	}
	int status;
	if (waitpid(c1, &status, 0) != c1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		die("child 1 failed");

	pid_t c2 = fork();
	if (c2 < 0)
		die("fork");
	if (c2 == 0) {
		printf("child2 pid=%d\n", getpid());
		exit(0);
	}
	if (waitpid(c2, &status, 0) != c2 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		die("child 2 failed");
	return 0;
}
