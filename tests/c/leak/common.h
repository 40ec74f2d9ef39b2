/* Helpers shared by the leak-audit test programs (tests/leak_audit.rs). */
#ifndef LEAK_COMMON_H
#define LEAK_COMMON_H

#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define die(...)                                                               \
	do {                                                                   \
		fprintf(stderr, __VA_ARGS__);                                  \
		fprintf(stderr, " (errno %d: %s)\n", errno, strerror(errno));  \
		exit(99);                                                      \
	} while (0)

/* "obj KIND HANDLE PARENT FUNCTION": what the test expects in the reports. */
static inline void created(const char *kind, const void *obj, const void *parent, const char *func)
{
	if (parent)
		printf("obj %s 0x%lx 0x%lx %s\n", kind, (unsigned long)(uintptr_t)obj,
		       (unsigned long)(uintptr_t)parent, func);
	else
		printf("obj %s 0x%lx null %s\n", kind, (unsigned long)(uintptr_t)obj, func);
	fflush(stdout);
}

/* The first simulated device, opened. */
static inline struct ibv_context *open_first(struct ibv_device ***list)
{
	int n = 0;
	*list = ibv_get_device_list(&n);
	if (!*list || n < 1)
		die("ibv_get_device_list");
	struct ibv_context *ctx = ibv_open_device((*list)[0]);
	if (!ctx)
		die("ibv_open_device");
	printf("context 0x%lx %s\n", (unsigned long)(uintptr_t)ctx, ibv_get_device_name((*list)[0]));
	return ctx;
}

static inline struct ibv_qp *rc_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr attr = {
		.send_cq = scq,
		.recv_cq = rcq,
		.srq = srq,
		.cap = { .max_send_wr = 4, .max_recv_wr = srq ? 0 : 4, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	return ibv_create_qp(pd, &attr);
}

#endif
