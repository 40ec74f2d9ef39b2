/*
 * What a fork() child inherits (tests/fork_safety.rs). The parent has a
 * live PD (`live`) and a destroyed one (`gone`) on context A, and a PD
 * (`orphan`) on context B, which it closed. The child must refuse what the
 * parent could not do either (destroy `orphan`, destroy `gone`, allocate on
 * B), may destroy `live`, and leaks one PD of its own on A.
 * Prints "child pid=N", "child leak pd 0x..", and one "ok NAME" or
 * "FAIL NAME" per check, and exits 0 when it got to the end.
 */
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int failures;

static void check(const char *who, const char *name, int good, int err)
{
	printf("%s %s %s (errno %d)\n", good ? "ok" : "FAIL", who, name, err);
	fflush(stdout);
	failures += !good;
}

int main(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list || n < 1)
		return 95;
	struct ibv_context *a = ibv_open_device(list[0]);
	struct ibv_context *b = ibv_open_device(list[n > 1 ? 1 : 0]);
	if (!a || !b)
		return 95;
	struct ibv_pd *live = ibv_alloc_pd(a);
	struct ibv_pd *gone = ibv_alloc_pd(a);
	struct ibv_pd *orphan = ibv_alloc_pd(b);
	check("parent", "setup", live && gone && orphan && ibv_dealloc_pd(gone) == 0 && ibv_close_device(b) == 0,
	      errno);

	pid_t pid = fork();
	if (pid < 0)
		return 94;
	if (pid == 0) {
		printf("child pid=%d\n", getpid());
		errno = 0;
		check("child", "dealloc orphan", ibv_dealloc_pd(orphan) == EINVAL, errno);
		errno = 0;
		check("child", "dealloc gone", ibv_dealloc_pd(gone) == EINVAL, errno);
		errno = 0;
		check("child", "alloc on closed b", ibv_alloc_pd(b) == NULL && errno == EINVAL, errno);
		errno = 0;
		check("child", "close closed b", ibv_close_device(b) == -1 && errno == EINVAL, errno);
		check("child", "dealloc live", ibv_dealloc_pd(live) == 0, errno);
		struct ibv_pd *own = ibv_alloc_pd(a);
		check("child", "alloc own", own != NULL, errno);
		printf("child leak pd 0x%lx\n", (unsigned long)(uintptr_t)own);
		printf("child failures=%d\n", failures);
		fflush(stdout);
		exit(failures ? 1 : 0);
	}
	int status;
	if (waitpid(pid, &status, 0) != pid)
		return 93;
	check("parent", "child exited 0", WIFEXITED(status) && WEXITSTATUS(status) == 0, 0);
	/* The parent's own PD is untouched by the child's destroy. */
	check("parent", "dealloc live", ibv_dealloc_pd(live) == 0, errno);
	check("parent", "close a", ibv_close_device(a) == 0, errno);
	ibv_free_device_list(list);
	printf("parent failures=%d\n", failures);
	return 0;
}
