/*
 * Sets up a PD, an MR and a CQ in the style of rdma-core's examples. Built
 * twice: with -DCLEANUP each error path frees what was made before it;
 * without, it returns at once (`if (!cq) return 1;`), which a fault sweep
 * must catch. With -DCRASH a failed CQ is used anyway; with -DHANG the
 * program waits forever after one; with -DORPHAN too, after starting a
 * child that leaves its session (setsid) and sleeps, its pid written to
 * $ORPHAN_PID_FILE: a daemon the sweep must not leave running.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <infiniband/verbs.h>

static char buf[4096];

int main(void)
{
	int rc = 1;
	struct ibv_device **list = ibv_get_device_list(NULL);
	if (!list)
		return 1;
	if (!list[0]) {
		ibv_free_device_list(list);
		return 1;
	}
	struct ibv_context *ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!ctx)
		return 1;
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	if (!pd)
		goto close;
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		goto dealloc;
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
#ifdef CRASH
	if (!cq)
		printf("cqe %d\n", *(volatile int *)cq);
#endif
#ifdef ORPHAN
	int ready[2];
	if (!cq && pipe(ready) == 0) {
		if (fork() == 0) {
			setsid();
			if (fork() == 0) {
				/* The grandchild: outside the sweep's process group
				 * and session, its parent gone. */
				const char *f = getenv("ORPHAN_PID_FILE");
				FILE *out = f ? fopen(f, "w") : NULL;
				if (out) {
					fprintf(out, "%d\n", (int)getpid());
					fclose(out);
				}
				(void)!write(ready[1], "x", 1);
				for (;;)
					pause();
			}
			_exit(0);
		}
		/* Hangs only once the grandchild is running. */
		char c;
		(void)!read(ready[0], &c, 1);
	}
#endif
#ifdef HANG
	if (!cq)
		for (;;)
			pause();
#endif
	if (!cq) {
#ifndef CLEANUP
		return 1;
#else
		goto dereg;
#endif
	}
	rc = 0;
	ibv_destroy_cq(cq);
	goto dereg; /* (the label is used in every build) */
dereg:
	ibv_dereg_mr(mr);
dealloc:
	ibv_dealloc_pd(pd);
close:
	ibv_close_device(ctx);
	return rc;
}
