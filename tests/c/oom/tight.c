/* Runs out of memory between setting up and tearing down: opens the first
 * device (and, with "leak", allocates a PD it never frees), then limits its
 * address space to what it has (RLIMIT_AS) and takes every byte malloc can
 * still give, so that any allocation after this fails. Then it closes the
 * context, gives the memory back only to report, and returns 5 from main:
 * the shim's reports at close and at exit must run in a process that has
 * no memory left, and never abort it. Prints "closed N" and "no memory".
 * With "many", it then allocates 250,000 PDs with no memory left, more
 * than the shim's emergency reserve can track, each with errno set to a
 * sentinel the (static) library leaves alone: the shim's failed attempts
 * to grow its table must not change it (exits 3 if they do). */
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* The memory taken, as a linked list through the blocks themselves. */
static void *hoard;

static long vm_size(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long pages = 0;

	if (!f || fscanf(f, "%ld", &pages) != 1)
		exit(2);
	fclose(f);
	return pages * 4096;
}

static void take_everything(void)
{
	for (size_t size = 1 << 20; size >= sizeof(void *); size /= 2) {
		void **p;

		while ((p = malloc(size))) {
			*p = hoard;
			hoard = p;
		}
	}
}

int main(int argc, char **argv)
{
	int leak = argc > 1 && !strcmp(argv[1], "leak");
	int many = argc > 1 && !strcmp(argv[1], "many");
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx;
	struct rlimit rl;
	int rc;

	if (!list || !list[0]) {
		fprintf(stderr, "no device\n");
		return 2;
	}
	ctx = ibv_open_device(list[0]);
	if (!ctx) {
		perror("ibv_open_device");
		return 2;
	}
	if (leak && !ibv_alloc_pd(ctx)) {
		perror("ibv_alloc_pd");
		return 2;
	}
	/* stdout's buffer, before there is no memory for it. */
	setvbuf(stdout, NULL, _IONBF, 0);
	rl.rlim_cur = rl.rlim_max = vm_size() + 64 * 1024;
	if (setrlimit(RLIMIT_AS, &rl)) {
		perror("setrlimit");
		return 2;
	}
	take_everything();
	printf("no memory\n");
	for (int i = 0; many && i < 250000; i++) {
		errno = 4242;
		if (!ibv_alloc_pd(ctx)) {
			perror("ibv_alloc_pd");
			return 2;
		}
		if (errno != 4242) {
			printf("errno %d after PD %d\n", errno, i);
			return 3;
		}
	}
	rc = ibv_close_device(ctx);
	printf("closed %d\n", rc);
	ibv_free_device_list(list);
	return 5;
}
