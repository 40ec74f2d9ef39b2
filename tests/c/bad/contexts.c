/*
 * Contexts and objects the real library never handed out, or has freed
 * (tests/bad_contexts.rs). Every check prints "ok NAME" or "FAIL NAME ..."
 * and the program exits 0 when it got to the end (a crash is the test's
 * failure too).
 *
 * usage: contexts garbage          garbage contexts only (the real library
 *                                  on the test bed, where no context opens)
 *        contexts closed SIMALIAS  also a closed context and dead objects,
 *                                  and a context opened behind the shim's
 *                                  back through SIMALIAS (a second name of
 *                                  the sim, so dlopen finds the loaded sim
 *                                  itself and not the shim)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

static void check(const char *name, int good, int err)
{
	if (good) {
		printf("ok %s\n", name);
	} else {
		printf("FAIL %s (errno %d: %s)\n", name, err, strerror(err));
		failures++;
	}
	fflush(stdout);
}

/* Every verb that takes a context, on `ctx`: each must fail with EINVAL. */
static void refused(const char *what, struct ibv_context *ctx)
{
	char name[128];
	struct ibv_device_attr dattr;
	struct ibv_port_attr pattr;
	union ibv_gid gid;
	uint16_t pkey;
	int rc;

#define EXPECT(verb, cond)                                                     \
	do {                                                                   \
		snprintf(name, sizeof name, "%s %s", what, verb);              \
		check(name, (cond) && errno == EINVAL, errno);                 \
	} while (0)

	errno = 0;
	EXPECT("ibv_alloc_pd", ibv_alloc_pd(ctx) == NULL);
	errno = 0;
	EXPECT("ibv_create_cq", ibv_create_cq(ctx, 4, NULL, NULL, 0) == NULL);
	errno = 0;
	EXPECT("ibv_create_comp_channel", ibv_create_comp_channel(ctx) == NULL);
	errno = 0;
	rc = ibv_query_device(ctx, &dattr);
	EXPECT("ibv_query_device", rc == EINVAL);
	errno = 0;
	/* The real ibv_query_port from the library, not verbs.h's inline one,
	   which reads the context before any library code runs. */
	rc = (ibv_query_port)(ctx, 1, (struct _compat_ibv_port_attr *)&pattr);
	EXPECT("ibv_query_port", rc == EINVAL);
	errno = 0;
	EXPECT("ibv_query_gid", ibv_query_gid(ctx, 1, 0, &gid) == -1);
	errno = 0;
	EXPECT("ibv_query_pkey", ibv_query_pkey(ctx, 1, 0, &pkey) == -1);
	errno = 0;
	struct ibv_async_event ev;
	EXPECT("ibv_get_async_event", ibv_get_async_event(ctx, &ev) == -1);
	errno = 0;
	EXPECT("ibv_close_device", ibv_close_device(ctx) == -1);
#undef EXPECT
}

int main(int argc, char **argv)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list || n < 1) {
		fprintf(stderr, "no devices: %s\n", strerror(errno));
		return 95;
	}

	refused("0x1234", (struct ibv_context *)0x1234);
	/* Readable memory that is not a context: its device field is not a
	   device. */
	uint64_t *junk = malloc(4096);
	memset(junk, 0x41, 4096);
	refused("heap", (struct ibv_context *)junk);
	/* A device where a context is expected. */
	refused("device", (struct ibv_context *)list[0]);

	if (argc > 2 && strcmp(argv[1], "closed") == 0) {
		struct ibv_context *ctx = ibv_open_device(list[0]);
		if (!ctx) {
			fprintf(stderr, "ibv_open_device: %s\n", strerror(errno));
			return 95;
		}
		struct ibv_pd *live = ibv_alloc_pd(ctx);
		struct ibv_pd *gone = ibv_alloc_pd(ctx);
		struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
		check("setup", live && gone && cq && ibv_dealloc_pd(gone) == 0, errno);
		char buf[64];
		errno = 0;
		check("destroyed pd ibv_reg_mr",
		      ibv_reg_mr(gone, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE) == NULL && errno == EINVAL,
		      errno);
		errno = 0;
		check("destroyed pd ibv_dealloc_pd", ibv_dealloc_pd(gone) == EINVAL, errno);
		check("close", ibv_close_device(ctx) == 0, errno);
		refused("closed", ctx);
		errno = 0;
		check("closed pd ibv_reg_mr",
		      ibv_reg_mr(live, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE) == NULL && errno == EINVAL,
		      errno);
		errno = 0;
		check("closed cq ibv_resize_cq", ibv_resize_cq(cq, 8) == EINVAL, errno);

		/* Opened where the shim does not see it: adopted, not refused. */
		void *sim = dlopen(argv[2], RTLD_NOW | RTLD_NOLOAD);
		if (!sim)
			fprintf(stderr, "dlopen %s: %s\n", argv[2], dlerror());
		struct ibv_context *(*sim_open)(struct ibv_device *) =
			sim ? (struct ibv_context * (*)(struct ibv_device *)) dlvsym(sim, "ibv_open_device", "IBVERBS_1.1") : NULL;
		check("dlvsym of the sim's own ibv_open_device", sim_open != NULL, errno);
		if (sim_open) {
			struct ibv_context *hidden = sim_open(list[0]);
			check("hidden open", hidden != NULL, errno);
			struct ibv_pd *pd = ibv_alloc_pd(hidden);
			check("hidden ibv_alloc_pd", pd != NULL, errno);
			struct ibv_device_attr attr;
			check("hidden ibv_query_device", ibv_query_device(hidden, &attr) == 0, errno);
			check("hidden ibv_dealloc_pd", pd && ibv_dealloc_pd(pd) == 0, errno);
			/* Leaked on purpose: the report at close names it. */
			struct ibv_pd *leak = ibv_alloc_pd(hidden);
			printf("leak pd 0x%lx\n", (unsigned long)(uintptr_t)leak);
			check("hidden ibv_close_device", ibv_close_device(hidden) == 0, errno);
		}
	}
	free(junk);
	ibv_free_device_list(list);
	printf("done failures=%d\n", failures);
	return 0;
}
