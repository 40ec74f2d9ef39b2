/* Locked-memory accounting: an unprivileged process (uid 65534) with
 * RLIMIT_MEMLOCK at 64 KiB registers at most 64 KiB of pages at a time.
 * Runs in a child (the probe itself must be root to drop to uid 65534). */
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "probe.h"

static const char *reg(struct probe *p, void *addr, size_t len, struct ibv_mr **out)
{
	errno = 0;
	struct ibv_mr *mr = ibv_reg_mr(p->pd, addr, len, IBV_ACCESS_LOCAL_WRITE);
	if (out)
		*out = mr;
	else if (mr)
		NEED(ibv_dereg_mr(mr) == 0);
	return mr ? "registered" : errno_name(errno);
}

static void child(void)
{
	struct rlimit rl = { 64 << 10, 64 << 10 };
	NEED(setrlimit(RLIMIT_MEMLOCK, &rl) == 0);
	NEED(setgid(65534) == 0);
	NEED(setuid(65534) == 0);
	struct probe p;
	probe_open(&p);
	size_t big = 16 << 20;
	char *buf = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	NEED(buf != MAP_FAILED);
	memset(buf, 1, big);
	say("mr_16mib", reg(&p, buf, big, NULL));

	/* 64 KiB starting 64 bytes into a page spans 17 pages. */
	static struct ibv_mr *mrs[1024];
	int n = 0;
	for (int i = 0; i < 1024; i++) {
		mrs[n] = ibv_reg_mr(p.pd, buf + (size_t)i * (16 << 10) + 64, 64 << 10,
				    IBV_ACCESS_LOCAL_WRITE);
		if (mrs[n])
			n++;
	}
	say_int("mr_64kib_unaligned_of_1024", n);
	for (int i = 0; i < n; i++)
		NEED(ibv_dereg_mr(mrs[i]) == 0);

	struct ibv_mr *whole;
	say("mr_64kib_aligned", reg(&p, buf, 64 << 10, &whole));
	say("then_mr_4kib", reg(&p, buf + (1 << 20), 4 << 10, NULL));
	if (whole)
		NEED(ibv_dereg_mr(whole) == 0);
	say("after_dereg_mr_4kib", reg(&p, buf + (1 << 20), 4 << 10, NULL));
	probe_close(&p);
	exit(0);
}

int main(void)
{
	NEED(geteuid() == 0);
	fflush(stdout);
	pid_t pid = fork();
	NEED(pid >= 0);
	if (pid == 0)
		child();
	int st;
	NEED(waitpid(pid, &st, 0) == pid);
	NEED(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	return 0;
}
